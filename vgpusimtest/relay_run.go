package vgpusimtest

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
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
// relay closes the other side's, and a message it holds back (a Delay)
// is lost with them: it is never half-open, so neither side, nor Wait,
// waits for the other past the point where one is gone.
type Relay struct {
	conns [2]net.Conn // a, b
	plan  RelayPlan

	ruleMu  sync.Mutex // one Rule call at a time
	closed  [2]sync.Once
	cut     chan struct{} // closed once either connection is: ends a Delay
	cutOnce sync.Once
	done    chan struct{}
	err     error // written before done is closed, read after
}

// NewRelay starts relaying between a and b as the plan says. The relay
// owns both connections from then on, and closes them when it ends. A nil
// connection, or a plan with a Rule and no Framer for either side (a
// Rule that could never be called), ends it at once, both connections
// closed and nothing relayed, with an error wrapping ErrInvalid.
func NewRelay(a, b net.Conn, p RelayPlan) *Relay {
	r := &Relay{conns: [2]net.Conn{a, b}, plan: p, cut: make(chan struct{}), done: make(chan struct{})}
	if a == nil || b == nil {
		return r.refuse(fmt.Errorf("%w: a relay with a nil connection", ErrInvalid))
	}
	var framers [2]Framer
	if p.Framing != nil {
		framers = [2]Framer{p.Framing(SideA), p.Framing(SideB)}
	}
	if p.Rule != nil && framers[0] == nil && framers[1] == nil {
		return r.refuse(fmt.Errorf("%w: a relay plan with a Rule but no Framer: the Rule would see no message", ErrInvalid))
	}
	// The two directions are a group: Wait returns the first error
	// either met, once both have ended.
	var g errgroup.Group
	for i, from := range []Side{SideA, SideB} {
		g.Go(func() error { return r.carry(from, framers[i]) })
	}
	go func() {
		r.err = g.Wait()
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
// ErrInvalid or ErrOutOfRange. Of the two directions', it is the error
// of the first to end with one; nil if none.
func (r *Relay) Wait() error {
	<-r.done
	return r.err
}

// Close closes both connections, ends a Delay's wait, and returns Wait's
// error once both directions have ended.
func (r *Relay) Close() error {
	r.closeEnds(SideA | SideB)
	return r.Wait()
}

// refuse ends r before it starts, for err: it closes what connections it
// has, since it owns them, and relays nothing.
func (r *Relay) refuse(err error) *Relay {
	r.err = err
	r.closeEnds(SideA | SideB)
	close(r.done)
	return r
}

// conn returns the connection of side e, one of SideA and SideB.
func (r *Relay) conn(e Side) net.Conn {
	if e == SideA {
		return r.conns[0]
	}
	return r.conns[1]
}

// closeEnds closes the connections of the sides in e, each once, in
// order, a before b. Closing either ends the relay, so it also ends any
// Delay's wait: a held message has nowhere to go.
func (r *Relay) closeEnds(e Side) {
	if e&(SideA|SideB) == 0 {
		return
	}
	for i, side := range []Side{SideA, SideB} {
		if e&side != 0 && r.conns[i] != nil {
			r.closed[i].Do(func() { _ = r.conns[i].Close() })
		}
	}
	r.cutOnce.Do(func() { close(r.cut) })
}

// carry relays what comes from side from to the other side, message by
// message as frame splits it (unframed if frame is nil), until the
// connection from it ends or is cut. It returns the first error the
// direction met: a Framer's, after which it went on unframed, or an
// Action's, which ended it.
func (r *Relay) carry(from Side, frame Framer) (err error) {
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
					err = fmt.Errorf("%w: message %d from %v: %w", ErrFraming, index, from, ferr)
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
			if goOn, aerr := r.act(Message{From: from, Index: index, Name: name, Data: m}, dst); !goOn {
				return cmp.Or(err, aerr)
			}
			index++
		}
		if frame == nil && len(pending) > 0 {
			_, _ = dst.Write(pending)
			pending = pending[:0]
		}
		if rerr != nil {
			return err
		}
	}
}

// act carries out the Rule's action on message m, which goes to dst, and
// reports whether the direction goes on and, if the action could not be
// carried out, why.
func (r *Relay) act(m Message, dst net.Conn) (bool, error) {
	a := r.decide(m)
	out, err := a.payload(m.Data)
	if err != nil {
		r.closeEnds(SideA | SideB)
		return false, fmt.Errorf("message %d from %v: %w", m.Index, m.From, err)
	}
	if a.Delay > 0 && !r.sleep(a.Delay) {
		return false, nil
	}
	if !a.Drop {
		for range a.Repeat + 1 {
			if _, err := dst.Write(out); err != nil {
				break
			}
		}
	}
	if a.Close == 0 {
		return true, nil
	}
	// The sides in the set first, then the other at once: closing it
	// here, rather than leaving it to the other direction's carry to
	// notice, keeps the relay from going half-open while that carry is
	// blocked writing to a side that does not read.
	r.closeEnds(a.Close)
	r.closeEnds(SideA | SideB)
	return false, nil
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

// sleep waits d, or until the relay's connections are closed, by Close,
// an Action or a direction that ended; it reports whether the wait ran
// its course. Without the second case a long Delay would keep its
// goroutine, and Wait, alive past both sides' end.
func (r *Relay) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.cut:
		return false
	}
}
