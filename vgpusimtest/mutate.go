package vgpusimtest

import "fmt"

// The mutators. Each returns a new slice and never modifies its input.
// The record-aware ones index a stream's records from 0, its metadata, as
// their sequence numbers do, and carry any bytes after the last whole
// record along unchanged.

// Flip returns stream with one bit flipped: bit 8k+b is bit b, least
// significant first, of byte k. A bit past the stream is ErrOutOfRange.
func Flip(stream []byte, bit int64) ([]byte, error) {
	if bit < 0 || bit >= 8*int64(len(stream)) {
		return nil, fmt.Errorf("%w: bit %d of a stream of %d bytes", ErrOutOfRange, bit, len(stream))
	}
	out := join(stream)
	out[bit/8] ^= 1 << (bit % 8)
	return out, nil
}

// Truncate returns the first n bytes of stream, as a stream cut short
// leaves them. An n past the stream is ErrOutOfRange; n equal to its
// length is a copy.
func Truncate(stream []byte, n int) ([]byte, error) {
	if n < 0 || n > len(stream) {
		return nil, fmt.Errorf("%w: %d bytes of a stream of %d", ErrOutOfRange, n, len(stream))
	}
	return join(stream[:n]), nil
}

// DuplicateRecord returns stream with record i sent twice in a row.
func DuplicateRecord(stream []byte, i int) ([]byte, error) {
	s, err := split(stream)
	if err != nil {
		return nil, err
	}
	rec, err := s.record(i)
	if err != nil {
		return nil, err
	}
	at := s.recs[i].End()
	return join(stream[:at], rec, stream[at:]), nil
}

// DropRecord returns stream without its record i: a record lost on the
// way, its neighbours closed up around the gap.
func DropRecord(stream []byte, i int) ([]byte, error) {
	s, err := split(stream)
	if err != nil {
		return nil, err
	}
	if _, err := s.record(i); err != nil {
		return nil, err
	}
	r := s.recs[i]
	return join(stream[:r.Offset], stream[r.End():]), nil
}

// SwapRecords returns stream with records i and j in each other's place:
// a reordering. Swapping a record with itself gives a copy.
func SwapRecords(stream []byte, i, j int) ([]byte, error) {
	s, err := split(stream)
	if err != nil {
		return nil, err
	}
	if i > j {
		i, j = j, i
	}
	ri, err := s.record(i)
	if err != nil {
		return nil, err
	}
	rj, err := s.record(j)
	if err != nil {
		return nil, err
	}
	if i == j {
		return join(stream), nil
	}
	a, b := s.recs[i], s.recs[j]
	return join(stream[:a.Offset], rj, stream[a.End():b.Offset], ri, stream[b.End():]), nil
}

// Splice returns the head of stream a, its header and its records before
// index at, followed by the tail of stream b from its record at on: two
// streams joined at a record boundary where each expects its own record
// at. at may be as large as either stream's record count, where the head
// is a whole (and the tail holds only what follows b's last whole
// record).
func Splice(a, b []byte, at int) ([]byte, error) {
	sa, err := split(a)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	sb, err := split(b)
	if err != nil {
		return nil, fmt.Errorf("tail: %w", err)
	}
	head, err := sa.boundary(at)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	tail, err := sb.boundary(at)
	if err != nil {
		return nil, fmt.Errorf("tail: %w", err)
	}
	return join(a[:head], b[tail:]), nil
}

// ReplayRecord returns stream with record i of stream from inserted
// before its own record i, or after its last whole record when i is its
// record count: a record replayed from another stream, or from an
// earlier run of the same one, where its sequence number fits.
func ReplayRecord(stream, from []byte, i int) ([]byte, error) {
	rec, s, err := recordFrom(stream, from, i)
	if err != nil {
		return nil, err
	}
	at, err := s.boundary(i)
	if err != nil {
		return nil, err
	}
	return join(stream[:at], rec, stream[at:]), nil
}

// ReplaceRecord returns stream with its record i replaced by record i of
// stream from: a record substituted, on the way, with the one another
// stream (or another run of the same) sent in its place, its sequence
// number the one the reader expects there.
func ReplaceRecord(stream, from []byte, i int) ([]byte, error) {
	rec, s, err := recordFrom(stream, from, i)
	if err != nil {
		return nil, err
	}
	if _, err := s.record(i); err != nil {
		return nil, err
	}
	r := s.recs[i]
	return join(stream[:r.Offset], rec, stream[r.End():]), nil
}

// recordFrom returns record i of from and the split of stream, the two
// things ReplayRecord and ReplaceRecord start from.
func recordFrom(stream, from []byte, i int) ([]byte, framed, error) {
	sf, err := split(from)
	if err != nil {
		return nil, framed{}, fmt.Errorf("from: %w", err)
	}
	rec, err := sf.record(i)
	if err != nil {
		return nil, framed{}, fmt.Errorf("from: %w", err)
	}
	s, err := split(stream)
	return rec, s, err
}
