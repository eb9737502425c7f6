package vgpusimtest

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"time"
)

// Relay is a man in the middle between two connections, a and b: it
// carries what arrives on each to the other, split into messages by the
// plan's Framers, and lets its Rule drop, delay, damage, duplicate or
// replace any message, or cut a connection where it lies. It tests what
// a protocol's ends do with a message tampered with on the way, where a
// FaultConn tests what they do with a connection that breaks.
//
// A Relay stores and forwards: a message goes on once it is whole, each
// copy in one Write, and the bytes of one its sender never finished are lost with
// the connection. A Write that fails (the end gone) loses what it
// carried, as the network would, and the relay reads on. When either
// direction ends, its sender's connection closed, cut or failed, the
// relay closes the other end's: it is never half-open, so neither end
// waits for the other past the point where one is gone.
type Relay struct {
	conns [2]net.Conn // a, b
	plan  RelayPlan

	ruleMu   sync.Mutex // one Rule call at a time
	stop     chan struct{}
	stopOnce sync.Once
	closed   [2]sync.Once
	done     chan struct{}

	mu  sync.Mutex
	err error
}

// NewRelay starts relaying between a and b as the plan says. The relay
// owns both connections from then on, and closes them when it ends. A nil
// connection ends it at once, with an error wrapping ErrInvalid.
func NewRelay(a, b net.Conn, p RelayPlan) *Relay {
	r := &Relay{conns: [2]net.Conn{a, b}, plan: p, stop: make(chan struct{}), done: make(chan struct{})}
	if a == nil || b == nil {
		r.fail(fmt.Errorf("%w: a relay with a nil connection", ErrInvalid))
		r.closeEnds(EndA | EndB)
		close(r.done)
		return r
	}
	var wg sync.WaitGroup
	for _, from := range []End{EndA, EndB} {
		var f Framer
		if p.Framing != nil {
			f = p.Framing(from)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.carry(from, f)
		}()
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

// NewRelayPipe returns the two ends of an in-memory connection (net.Pipe)
// that runs through a relay: what a writes, b reads, and the other way
// round, as the plan lets it. The ends are the caller's to close; the
// relay ends when either is closed.
func NewRelayPipe(p RelayPlan) (a, b net.Conn, r *Relay) {
	a, ra := net.Pipe()
	rb, b := net.Pipe()
	return a, b, NewRelay(ra, rb, p)
}

// Wait blocks until both directions have ended and returns what went
// wrong in the relay itself, if anything: a Framer's error, wrapping
// ErrFraming, or an Action that could not be carried out, wrapping
// ErrInvalid or ErrOutOfRange. It is the first such error; nil if none.
func (r *Relay) Wait() error {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close closes both connections, ends a Delay's wait, and returns Wait's
// error once both directions have ended.
func (r *Relay) Close() error {
	r.stopOnce.Do(func() { close(r.stop) })
	r.closeEnds(EndA | EndB)
	return r.Wait()
}

// conn returns the connection of end e, one of EndA and EndB.
func (r *Relay) conn(e End) net.Conn {
	if e == EndA {
		return r.conns[0]
	}
	return r.conns[1]
}

// closeEnds closes the connections of the ends in e, each once.
func (r *Relay) closeEnds(e End) {
	for i, end := range []End{EndA, EndB} {
		if e&end != 0 && r.conns[i] != nil {
			r.closed[i].Do(func() { _ = r.conns[i].Close() })
		}
	}
}

// fail keeps err, if it is the first.
func (r *Relay) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// carry relays what comes from end from to the other end, message by
// message as frame splits it (unframed if frame is nil), until the
// connection from it ends or is cut.
func (r *Relay) carry(from End, frame Framer) {
	src, dst := r.conn(from), r.conn(from.other())
	defer r.closeEnds(from.other())
	buf := make([]byte, 32<<10)
	var pending []byte
	want, name, index := 0, "", 0
	for {
		n, rerr := src.Read(buf)
		pending = append(pending, buf[:n]...)
		for frame != nil {
			if want == 0 {
				var ferr error
				want, name, ferr = frame(pending)
				if ferr == nil && want < 0 {
					ferr = fmt.Errorf("a length of %d", want)
				}
				if ferr != nil {
					r.fail(fmt.Errorf("%w: message %d from %v: %w", ErrFraming, index, from, ferr))
					frame, want = nil, 0
					break
				}
				if want == 0 {
					break
				}
			}
			if len(pending) < want {
				break
			}
			m := pending[:want:want]
			pending, want = pending[want:], 0
			if !r.act(Message{From: from, Index: index, Name: name, Data: m}, dst) {
				return
			}
			index++
		}
		if frame == nil && len(pending) > 0 {
			_, _ = dst.Write(pending)
			pending = pending[:0]
		}
		if rerr != nil {
			return
		}
	}
}

// act carries out the Rule's action on message m, which goes to dst, and
// reports whether the direction goes on.
func (r *Relay) act(m Message, dst net.Conn) bool {
	a := r.decide(m)
	out, err := a.payload(m.Data)
	if err != nil {
		r.fail(fmt.Errorf("message %d from %v: %w", m.Index, m.From, err))
		r.closeEnds(EndA | EndB)
		return false
	}
	if a.Delay > 0 && !r.sleep(a.Delay) {
		return false
	}
	if !a.Drop {
		for range a.Repeat + 1 {
			if _, err := dst.Write(out); err != nil {
				break
			}
		}
	}
	r.closeEnds(a.Close)
	return a.Close&m.From == 0
}

// decide asks the Rule, one call at a time, what to do with m, and gives
// it a copy of the message to keep.
func (r *Relay) decide(m Message) Action {
	if r.plan.Rule == nil {
		return Action{}
	}
	r.ruleMu.Lock()
	defer r.ruleMu.Unlock()
	m.Data = bytes.Clone(m.Data)
	return r.plan.Rule(m)
}

// sleep waits d, or until the relay is closed; it reports whether the
// wait ran its course.
func (r *Relay) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stop:
		return false
	}
}
