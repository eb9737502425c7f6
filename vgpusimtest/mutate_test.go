package vgpusimtest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// The records of testStream, by index.
const (
	recMeta      = 0
	recBatch     = 1 // the first of four page batches
	recEndRound  = 5
	recDevice    = 6
	recEndStream = 7
	recCount     = 8
)

// TestRecords splits a stream written by checkpoint.Writer into the
// records it wrote, in order and end to end.
func TestRecords(t *testing.T) {
	s := testStream(t, 1, 1)
	recs, err := Records(s)
	must(t, err)
	want := []checkpoint.RecordType{checkpoint.RecordMetadata, checkpoint.RecordPageBatch, checkpoint.RecordPageBatch,
		checkpoint.RecordPageBatch, checkpoint.RecordPageBatch, checkpoint.RecordEndRound, checkpoint.RecordDeviceState,
		checkpoint.RecordEndStream}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	end := int64(40)
	for i, r := range recs {
		if r.Type != want[i] || r.Seq != uint64(i) || r.Offset != end {
			t.Fatalf("record %d: %+v, want a %v record %d at offset %d", i, r, want[i], i, end)
		}
		end = r.End()
	}
	if end != int64(len(s)) {
		t.Fatalf("records end at %d of %d bytes", end, len(s))
	}
	// Cut inside the last record: the whole ones are still found.
	recs, err = Records(s[:len(s)-1])
	if !errors.Is(err, ErrFraming) || len(recs) != recCount-1 {
		t.Fatalf("a stream cut short: %d records, %v", len(recs), err)
	}
}

// refusal is one row of the table: a mutation of the test stream a, with
// another stream b at hand, and the sentinel the checkpoint reader refuses
// it with (nil: the mutation changes nothing, and the stream is read).
type refusal struct {
	name   string
	mutate func(a, b []byte) ([]byte, error)
	want   error
}

// refusals is the table of which mutations the checkpoint reader refuses,
// and how: every one that changes a byte.
var refusals = []refusal{
	{"flip magic", func(a, _ []byte) ([]byte, error) { return Flip(a, 7) }, checkpoint.ErrBadMagic},
	{"flip stream id", func(a, _ []byte) ([]byte, error) { return Flip(a, 16*8+3) }, checkpoint.ErrChecksum},
	{"flip optional header flag", func(a, _ []byte) ([]byte, error) { return Flip(a, 13*8+6) }, checkpoint.ErrChecksum},
	{"flip header check", func(a, _ []byte) ([]byte, error) { return Flip(a, 39*8) }, checkpoint.ErrChecksum},
	{"flip record type", func(a, _ []byte) ([]byte, error) { return flipIn(a, recBatch, 0) }, checkpoint.ErrChecksum},
	{"flip record length", func(a, _ []byte) ([]byte, error) { return flipIn(a, recBatch, 2*8+31) }, checkpoint.ErrLimit},
	{"flip sequence number", func(a, _ []byte) ([]byte, error) { return flipIn(a, recDevice, 6*8) }, checkpoint.ErrSequence},
	{"flip payload", func(a, _ []byte) ([]byte, error) { return flipIn(a, recBatch+2, 20*8+5) }, checkpoint.ErrChecksum},
	{"flip check value", func(a, _ []byte) ([]byte, error) { return flipIn(a, recEndStream, -1) }, checkpoint.ErrChecksum},
	{"truncate to nothing", func(a, _ []byte) ([]byte, error) { return Truncate(a, 0) }, checkpoint.ErrTruncated},
	{"truncate in the header", func(a, _ []byte) ([]byte, error) { return Truncate(a, 20) }, checkpoint.ErrTruncated},
	{"truncate in a record", func(a, _ []byte) ([]byte, error) { return Truncate(a, len(a)/2) }, checkpoint.ErrTruncated},
	{"truncate at a record boundary", func(a, _ []byte) ([]byte, error) { return truncateBefore(a, recEndStream) }, checkpoint.ErrTruncated},
	{"truncate nothing", func(a, _ []byte) ([]byte, error) { return Truncate(a, len(a)) }, nil},
	{"duplicate metadata", func(a, _ []byte) ([]byte, error) { return DuplicateRecord(a, recMeta) }, checkpoint.ErrSequence},
	{"duplicate page batch", func(a, _ []byte) ([]byte, error) { return DuplicateRecord(a, recBatch) }, checkpoint.ErrSequence},
	// The reader stops at the end of the stream; what follows is the
	// file's to refuse (checkpoint.Restore).
	{"duplicate end of stream", func(a, _ []byte) ([]byte, error) { return DuplicateRecord(a, recEndStream) }, checkpoint.ErrMalformed},
	{"drop metadata", func(a, _ []byte) ([]byte, error) { return DropRecord(a, recMeta) }, checkpoint.ErrSequence},
	{"drop page batch", func(a, _ []byte) ([]byte, error) { return DropRecord(a, recBatch+1) }, checkpoint.ErrSequence},
	{"drop end of stream", func(a, _ []byte) ([]byte, error) { return DropRecord(a, recEndStream) }, checkpoint.ErrTruncated},
	{"swap page batches", func(a, _ []byte) ([]byte, error) { return SwapRecords(a, recBatch, recBatch+1) }, checkpoint.ErrSequence},
	{"swap metadata and end of stream", func(a, _ []byte) ([]byte, error) { return SwapRecords(a, recEndStream, recMeta) }, checkpoint.ErrSequence},
	{"swap a record with itself", func(a, _ []byte) ([]byte, error) { return SwapRecords(a, recBatch, recBatch) }, nil},
	{"splice at the first record", func(a, b []byte) ([]byte, error) { return Splice(a, b, recMeta) }, checkpoint.ErrChecksum},
	{"splice mid-round", func(a, b []byte) ([]byte, error) { return Splice(a, b, recBatch+2) }, checkpoint.ErrChecksum},
	{"splice at the end of stream", func(a, b []byte) ([]byte, error) { return Splice(a, b, recEndStream) }, checkpoint.ErrChecksum},
	{"splice a stream with itself", func(a, _ []byte) ([]byte, error) { return Splice(a, a, recBatch+2) }, nil},
	{"splice after the last record", func(a, b []byte) ([]byte, error) { return Splice(a, b, recCount) }, nil},
	{"replay metadata", func(a, b []byte) ([]byte, error) { return ReplayRecord(a, b, recMeta) }, checkpoint.ErrChecksum},
	{"replay page batch", func(a, b []byte) ([]byte, error) { return ReplayRecord(a, b, recBatch+1) }, checkpoint.ErrChecksum},
	{"replay from the same stream", func(a, _ []byte) ([]byte, error) { return ReplayRecord(a, a, recDevice) }, checkpoint.ErrSequence},
	{"replay end of stream", func(a, b []byte) ([]byte, error) { return ReplayRecord(a, b, recEndStream) }, checkpoint.ErrChecksum},
	{"replace page batch", func(a, b []byte) ([]byte, error) { return ReplaceRecord(a, b, recBatch+1) }, checkpoint.ErrChecksum},
	{"replace with its own", func(a, _ []byte) ([]byte, error) { return ReplaceRecord(a, a, recDevice) }, nil},
}

// flipIn flips bit of record i of s, counted from the record's start; a
// negative bit counts from its end.
func flipIn(s []byte, i int, bit int64) ([]byte, error) {
	recs, err := Records(s)
	if err != nil {
		return nil, err
	}
	r := recs[i]
	if bit < 0 {
		bit += 8 * r.Bytes
	}
	return Flip(s, 8*r.Offset+bit)
}

// truncateBefore cuts s just before record i.
func truncateBefore(s []byte, i int) ([]byte, error) {
	recs, err := Records(s)
	if err != nil {
		return nil, err
	}
	return Truncate(s, int(recs[i].Offset))
}

// TestRefusals checks the table against the real reader: the mutated
// stream is refused with the row's sentinel, as a *checkpoint.Error, and
// the two streams mutated are as they were.
func TestRefusals(t *testing.T) {
	a, b := testStream(t, 1, 1), testStream(t, 1, 2)
	must(t, restore(t, a, 1))
	must(t, restore(t, b, 1))
	ca, cb := bytes.Clone(a), bytes.Clone(b)
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			m, err := r.mutate(a, b)
			must(t, err)
			if !bytes.Equal(a, ca) || !bytes.Equal(b, cb) {
				t.Fatal("the mutator modified its input")
			}
			err = restore(t, m, 1)
			if r.want == nil {
				if err != nil || !bytes.Equal(m, a) {
					t.Fatalf("a mutation that changes nothing: %v, same bytes %v", err, bytes.Equal(m, a))
				}
				return
			}
			refused(t, err, r.want)
		})
	}
}

// refused fails t unless err is a *checkpoint.Error wrapping want.
func refused(t *testing.T, err, want error) {
	t.Helper()
	var ce *checkpoint.Error
	if !errors.As(err, &ce) || !errors.Is(err, want) {
		t.Fatalf("reader returned %v, want a *checkpoint.Error wrapping %v", err, want)
	}
}

// TestEveryMutationRefused applies each record-aware mutator at every
// index it takes, and flips bits all over the stream: every mutant that
// differs from the stream is refused with a typed error, never read and
// never a panic.
func TestEveryMutationRefused(t *testing.T) {
	a, b := testStream(t, 1, 1), testStream(t, 1, 2)
	var mutants [][]byte
	add := func(m []byte, err error) {
		must(t, err)
		if !bytes.Equal(m, a) {
			mutants = append(mutants, m)
		}
	}
	for i := range recCount {
		add(DuplicateRecord(a, i))
		add(DropRecord(a, i))
		add(ReplayRecord(a, b, i))
		add(ReplaceRecord(a, b, i))
		add(Splice(a, b, i))
		add(Splice(b, a, i))
		for j := range recCount {
			add(SwapRecords(a, i, j))
		}
	}
	// A bit of every byte of the header and of each record's header and
	// check value, and bits drawn from a fixed seed elsewhere.
	recs, err := Records(a)
	must(t, err)
	bits := []int64{}
	for i := range int64(40) {
		bits = append(bits, 8*i+i%8)
	}
	for _, r := range recs {
		for i := range int64(14) {
			bits = append(bits, 8*(r.Offset+i)+i%8)
		}
		for i := range int64(8) {
			bits = append(bits, 8*(r.End()-8+i)+(i+3)%8)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		bits = append(bits, rng.Int64N(8*int64(len(a))))
	}
	for _, bit := range bits {
		add(Flip(a, bit))
	}
	for n := range len(a) {
		if n%997 == 0 || n < 48 {
			add(Truncate(a, n))
		}
	}
	for _, m := range mutants {
		var ce *checkpoint.Error
		if err := restore(t, m, 1); !errors.As(err, &ce) {
			t.Fatalf("a mutant of %d bytes: reader returned %v, want a *checkpoint.Error", len(m), err)
		}
	}
	t.Logf("%d mutants refused", len(mutants))
}

// TestMutatorErrors: arguments past the stream, and streams whose framing
// does not reach the record asked for, are errors, never a panic.
func TestMutatorErrors(t *testing.T) {
	a := testStream(t, 1, 1)
	cut := a[:len(a)-3]
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"flip past the end", second(Flip(a, 8*int64(len(a)))), ErrOutOfRange},
		{"flip negative", second(Flip(a, -1)), ErrOutOfRange},
		{"truncate past the end", second(Truncate(a, len(a)+1)), ErrOutOfRange},
		{"duplicate past the last record", second(DuplicateRecord(a, recCount)), ErrOutOfRange},
		{"duplicate a record cut short", second(DuplicateRecord(cut, recEndStream)), ErrFraming},
		{"drop past the last record", second(DropRecord(a, recCount)), ErrOutOfRange},
		{"drop a record cut short", second(DropRecord(cut, recEndStream)), ErrFraming},
		{"swap negative", second(SwapRecords(a, -1, 2)), ErrOutOfRange},
		{"splice past the end", second(Splice(a, a, recCount+1)), ErrOutOfRange},
		{"replay from nothing", second(ReplayRecord(a, nil, 0)), ErrFraming},
		{"replay past the end", second(ReplayRecord(a, a, recCount)), ErrOutOfRange},
		{"replace from a stream cut short", second(ReplaceRecord(a, cut, recEndStream)), ErrFraming},
		{"replace past the end", second(ReplaceRecord(a, a, recCount)), ErrOutOfRange},
		{"header size out of range", second(DuplicateRecord(bytes.Repeat([]byte{0xff}, 64), 0)), ErrFraming},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	// The whole records before a cut are still there to mutate.
	if _, err := DuplicateRecord(cut, recBatch); err != nil {
		t.Errorf("duplicate a whole record of a stream cut short: %v", err)
	}
}

func second(_ []byte, err error) error { return err }

// FuzzMutators runs every mutator on arbitrary bytes: none panics or
// modifies its input, and each returns a new slice or an error.
func FuzzMutators(f *testing.F) {
	f.Add(testStream(f, 1, 1), testStream(f, 2, 2), uint16(3), uint16(5))
	f.Add([]byte{}, []byte{0x89}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, a, b []byte, i, j uint16) {
		ca, cb := bytes.Clone(a), bytes.Clone(b)
		outs := [][]byte{}
		keep := func(m []byte, err error) {
			if err == nil {
				outs = append(outs, m)
			}
		}
		keep(Flip(a, int64(i)*8+int64(j%8)))
		keep(Truncate(a, int(i)))
		keep(DuplicateRecord(a, int(i)))
		keep(SwapRecords(a, int(i), int(j)))
		keep(Splice(a, b, int(i)))
		keep(ReplayRecord(a, b, int(j)))
		keep(DropRecord(a, int(i)))
		keep(ReplaceRecord(a, b, int(j)))
		_, _ = Records(a)
		if !bytes.Equal(a, ca) || !bytes.Equal(b, cb) {
			t.Fatal("a mutator modified its input")
		}
		for _, m := range outs {
			if len(m) > 0 && len(a) > 0 && &m[0] == &a[0] {
				t.Fatal("a mutator returned its input")
			}
		}
	})
}
