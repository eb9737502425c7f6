package live

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// tapAction is what a tap does when its end's writes reach the cut.
type tapAction uint8

const (
	actPass     tapAction = iota + 1 // nothing: the point is only noted
	actDrop                          // close both ends
	actStall                         // carry nothing more; the write blocks until its deadline
	actCorrupt                       // flip the byte at the cut, carry the rest of its unit, then wait for the peer to give up
	actRefuse                        // write a refusal, its tag forged, in place of the message at the cut
	actKillPeer                      // the peer's process ends; this end's writes fail from the cut on
	actSwallow                       // the message at the cut is lost with the peer, which ends
	actCancel                        // the source's caller cancels; the write waits for Send to close the source's end
)

// tap wraps one end's connection. It parses what that end writes and, at
// the first offset cut returns, calls onTrip once and then acts.
type tap struct {
	net.Conn
	cut    func(units []wireUnit) (int64, bool)
	act    tapAction
	onTrip func()
	kill   func() // ends the destination: cancels its context and closes its end
	cancel func() // cancels the source's context
	peer   *tap
	source bool // the source's end

	mu       sync.Mutex
	wire     *wireParser
	sent     int64 // bytes carried
	tripped  bool
	rounds   int    // end-of-round records wholly before the cut
	atType   uint16 // the type of the record or message the cut is in
	tail     int64  // actCorrupt: the end of the unit the cut is in
	deadline time.Time
	closed   chan struct{}
	once     sync.Once
}

func newTap(c net.Conn, source bool) *tap {
	return &tap{Conn: c, wire: newWireParser(source), source: source, closed: make(chan struct{})}
}

var errTapped = errors.New("connection broken by the test")

// peerWait bounds how long a tap waits for the other end to react: far
// more than it takes, so that only a hang trips it.
const peerWait = 20 * time.Second

func (c *tap) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *tap) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// waitClosed waits until Close was called on c.
func (c *tap) waitClosed() {
	select {
	case <-c.closed:
	case <-time.After(peerWait):
	}
}

// trip reports whether the tap tripped, after how many rounds, and in
// what type of record or message.
func (c *tap) trip() (tripped bool, rounds int, typ uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tripped, c.rounds, c.atType
}

func (c *tap) carry(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.sent += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *tap) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.tripped {
		act, tail, sent := c.act, c.tail, c.sent
		c.mu.Unlock()
		return c.after(p, act, tail, sent)
	}
	c.wire.feed(p)
	cut, ok := int64(0), false
	if c.cut != nil {
		cut, ok = c.cut(c.wire.units)
	}
	if !ok || cut >= c.sent+int64(len(p)) {
		c.mu.Unlock()
		return c.carry(p)
	}
	cut = max(cut, c.sent)
	c.tripped = true
	for _, u := range c.wire.units {
		if u.start <= cut && cut < u.end {
			c.tail, c.atType = u.end, u.typ
		}
		if u.end <= cut && u.kind == unitRecord && u.typ == recEndOfRound {
			c.rounds++
		}
	}
	head, tail := int(cut-c.sent), c.tail
	c.mu.Unlock()
	if c.onTrip != nil {
		c.onTrip()
	}
	switch c.act {
	case actPass:
		return c.carry(p)
	case actDrop:
		n, _ := c.carry(p[:head])
		c.Close()
		c.peer.Close()
		return n, errTapped
	case actStall:
		n, _ := c.carry(p[:head])
		return n, c.stall()
	case actCorrupt:
		q := append([]byte(nil), p...)
		q[head] ^= 0xff
		return c.after(q, actCorrupt, tail, cut-int64(head))
	case actRefuse:
		forged, _ := json.Marshal(refusal{Code: "other", Message: "the destination turns the VM down"})
		msg := append([]byte{byte(msgRefuse), 0, 0, 0, 0}, forged...)
		binary.LittleEndian.PutUint32(msg[1:], uint32(len(forged)))
		msg = append(msg, make([]byte, tagBytes)...) // a tag forged without the key
		if _, err := c.carry(msg); err != nil {
			return 0, err
		}
		return len(p), nil
	case actKillPeer:
		n, _ := c.carry(p[:head])
		c.kill()
		return n, errTapped
	case actSwallow:
		c.kill()
		return len(p), nil
	case actCancel:
		n, _ := c.carry(p[:head])
		c.cancel()
		if c.source { // Send closes its end
			c.waitClosed()
			return n, net.ErrClosed
		}
		c.peer.waitClosed() // the destination answers a source that has gone
		m, err := c.carry(p[head:])
		return n + m, err
	}
	panic("unknown tap action")
}

// after handles a write once the tap tripped, the end having carried sent
// bytes: a corrupted unit goes on to its end, and then the writer waits
// for the peer, which rejected it, to close; a stalled or broken end
// carries nothing more; a refusal's or a cancel's end carries on.
func (c *tap) after(p []byte, act tapAction, tail, sent int64) (int, error) {
	switch act {
	case actPass, actRefuse, actCancel:
		return c.carry(p)
	case actStall:
		return 0, c.stall()
	case actCorrupt:
		n := 0
		if sent < tail {
			var err error
			if n, err = c.carry(p[:min(int64(len(p)), tail-sent)]); err != nil || n == len(p) {
				return n, err
			}
		}
		c.peer.waitClosed()
		return n, net.ErrClosed
	}
	return 0, errTapped
}

// stall blocks until the write deadline passes or the end is closed, as a
// write to a peer that stopped reading does.
func (c *tap) stall() error {
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	wait := peerWait
	if !d.IsZero() {
		wait = time.Until(d)
	}
	select {
	case <-time.After(wait):
		return os.ErrDeadlineExceeded
	case <-c.closed:
		return net.ErrClosed
	}
}
