package vgpusimtest

import (
	"fmt"
	"time"
)

// Fault is the plan of a FaultConn: what goes wrong, and when. Its zero
// value breaks nothing, and the connection passes everything through.
// Offsets count the bytes of one direction from the connection's first.
type Fault struct {
	// Write cuts the bytes the connection's user writes.
	Write Cut
	// Read cuts the bytes it reads.
	Read Cut
	// FlipWriteBits are bits of the written bytes that the peer receives
	// flipped: bit 8k+b is bit b, least significant first, of byte k. The
	// caller's buffer is left as it was.
	FlipWriteBits []int64
	// FlipReadBits are bits of the bytes read that the caller receives
	// flipped, numbered the same way.
	FlipReadBits []int64
	// WriteDelay delays each Write before any of its bytes go out.
	WriteDelay time.Duration
	// WriteBytesPerSec caps the rate of writes: a piece of k bytes holds
	// the next back for k/WriteBytesPerSec seconds. Zero: no cap.
	WriteBytesPerSec int64
	// WriteChunkBytes, if positive, passes each Write on in pieces of 1
	// to WriteChunkBytes bytes, their sizes drawn from Seed, so that the
	// peer's reads see the stream split at places it did not choose.
	WriteChunkBytes int
	// Seed seeds every draw the plan makes. The same plan over the same
	// writes draws the same.
	Seed uint64
}

// Cut breaks one direction of a connection after a number of bytes. Its
// zero value never breaks.
type Cut struct {
	// Mode is how the direction breaks.
	Mode CutMode
	// After is the number of bytes that go through before it does.
	After int64
}

// CutMode is how a Cut breaks a direction.
type CutMode uint8

const (
	// CutNone never breaks.
	CutNone CutMode = iota
	// CutClose closes the connection, as a peer or a middlebox that
	// resets it does: the peer sees it end, and the call that reaches
	// the cut, and every one after, fails with a *FaultError.
	CutClose
	// CutStall stops the direction without a word, as a dead peer does:
	// the call that reaches the cut, and every one after, blocks until
	// the direction's deadline passes or the connection is closed, and
	// then fails with a *FaultError wrapping os.ErrDeadlineExceeded or
	// net.ErrClosed.
	CutStall
)

// String names the mode: "none", "close" or "stall".
func (m CutMode) String() string {
	switch m {
	case CutNone:
		return "none"
	case CutClose:
		return "close"
	case CutStall:
		return "stall"
	}
	return fmt.Sprintf("CutMode(%d)", uint8(m))
}

// CloseAfter is the Cut that closes the connection after n bytes.
func CloseAfter(n int64) Cut { return Cut{Mode: CutClose, After: n} }

// StallAfter is the Cut that stalls the direction after n bytes.
func StallAfter(n int64) Cut { return Cut{Mode: CutStall, After: n} }

// Validate reports a plan that cannot be carried out: a negative offset,
// delay, rate or chunk size, or an unknown cut mode. The error wraps
// ErrInvalid.
func (f Fault) Validate() error {
	for _, c := range []struct {
		name string
		cut  Cut
	}{{"Write", f.Write}, {"Read", f.Read}} {
		if c.cut.Mode > CutStall {
			return fmt.Errorf("%w: %s cut mode %v", ErrInvalid, c.name, c.cut.Mode)
		}
		if c.cut.After < 0 {
			return fmt.Errorf("%w: %s cut after %d bytes", ErrInvalid, c.name, c.cut.After)
		}
	}
	for _, bits := range [][]int64{f.FlipWriteBits, f.FlipReadBits} {
		for _, b := range bits {
			if b < 0 {
				return fmt.Errorf("%w: flip of bit %d", ErrInvalid, b)
			}
		}
	}
	switch {
	case f.WriteDelay < 0:
		return fmt.Errorf("%w: write delay %v", ErrInvalid, f.WriteDelay)
	case f.WriteBytesPerSec < 0:
		return fmt.Errorf("%w: write rate %d B/s", ErrInvalid, f.WriteBytesPerSec)
	case f.WriteChunkBytes < 0:
		return fmt.Errorf("%w: write chunks of %d bytes", ErrInvalid, f.WriteChunkBytes)
	}
	return nil
}
