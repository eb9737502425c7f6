package sched

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
	"time"
)

// savedState returns the saved state of a paused 4Q tenant with a job in
// progress (overshoot debt from a chunked first job) and a queued job.
func savedState(t *testing.T) (*Scheduler, TenantID, []byte) {
	t.Helper()
	s, ids := newOn(t, Config{Slice: ms, Start: 5 * time.Second}, 6, 6)
	submit(t, s, ids[0], Job{Work: 1500 * time.Microsecond, Chunk: 1500 * time.Microsecond, Tag: 1})
	submit(t, s, ids[0], Job{Work: 10 * ms, Tag: 2})
	submit(t, s, ids[0], Job{Work: 20 * ms, Tag: 3})
	submit(t, s, ids[1], Job{Work: time.Second})
	advance(t, s, 4*ms)
	if err := s.Pause(ids[0]); err != nil {
		t.Fatal(err)
	}
	data, err := s.SaveTenant(nil, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	return s, ids[0], data
}

// A tenant saved on one host and restored on another, with another clock,
// keeps its queue, its progress, its debt and its jobs' ages.
func TestSaveRestoreMovesTenantAcrossClocks(t *testing.T) {
	src, id, data := savedState(t)
	before, _ := src.Tenant(id)
	if before.Debt == 0 || before.Queued != 2 {
		t.Fatalf("source tenant %+v: want debt and two queued jobs", before)
	}
	if len(data) != stateHeaderSize+2*stateJobSize+stateTrailerSize {
		t.Fatalf("state is %d bytes, want 40 + 48 per job", len(data))
	}

	dst, _ := New(Config{Slice: ms, Start: 100 * time.Hour})
	nid, _ := dst.AddTenant(6)
	_ = dst.PowerOn(nid)
	_ = dst.Pause(nid)
	if err := dst.RestoreTenant(nid, data); err != nil {
		t.Fatal(err)
	}
	after, _ := dst.Tenant(nid)
	if after.Queued != before.Queued || after.QueuedWork != before.QueuedWork || after.Debt != before.Debt {
		t.Fatalf("restored %+v, saved %+v", after, before)
	}
	_ = dst.Resume(nid)
	rep := advance(t, dst, 100*ms)
	if len(rep.Completions) != 2 {
		t.Fatalf("completions %+v", rep.Completions)
	}
	first := rep.Completions[0]
	// Job 2 was submitted at 5s and started at 5s+1.5ms+1ms (after the
	// chunked job and the neighbour's slice); its age and delay carry over.
	wantSubmitted := 100*time.Hour - 4*ms
	if first.Tag != 2 || first.Submitted != wantSubmitted || first.QueueDelay() != 2500*time.Microsecond {
		t.Fatalf("first completion %+v (delay %v), want job 2 submitted at %v, delay 2.5ms", first, first.QueueDelay(), wantSubmitted)
	}
}

func TestSaveIsDeterministic(t *testing.T) {
	_, _, a := savedState(t)
	_, _, b := savedState(t)
	if !bytes.Equal(a, b) {
		t.Fatal("the same history saved different bytes")
	}
}

// withCRC recomputes the checksum so that a test reaches the field checks.
func withCRC(b []byte) []byte {
	n := len(b) - stateTrailerSize
	le.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

func put64(off int, v int64) func([]byte) []byte {
	return func(b []byte) []byte { le.PutUint64(b[off:], uint64(v)); return withCRC(b) }
}

// Each kind of corruption has its typed error and, for malformed fields,
// the offset of the field.
func TestRestoreRejectsEachKindOfCorruption(t *testing.T) {
	job0, job1 := stateHeaderSize, stateHeaderSize+stateJobSize
	for _, tc := range []struct {
		kind    string
		corrupt func([]byte) []byte
		want    error
		offset  int // for ErrCorruptState
	}{
		{"empty", func(b []byte) []byte { return nil }, ErrCorruptState, 0},
		{"truncated header", func(b []byte) []byte { return b[:20] }, ErrCorruptState, 20},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrCorruptState, 0},
		{"newer version", func(b []byte) []byte { b[4] = 2; return withCRC(b) }, ErrUnsupportedVersion, 0},
		{"flipped bit", func(b []byte) []byte { b[job0+3] ^= 4; return b }, ErrCorruptState, 2*stateJobSize + stateHeaderSize},
		{"truncated job", func(b []byte) []byte { return withCRC(b[:len(b)-10]) }, ErrCorruptState, 32},
		{"trailing bytes", func(b []byte) []byte { return withCRC(append(b, 0, 0, 0, 0)) }, ErrCorruptState, 32},
		{"job count above the limit", func(b []byte) []byte { le.PutUint32(b[32:], MaxQueueLimit+1); return withCRC(b) }, ErrCorruptState, 32},
		{"job count above this scheduler's MaxQueue", nil, ErrQueueFull, 0},
		{"max instances zero", func(b []byte) []byte { le.PutUint16(b[6:], 0); return withCRC(b) }, ErrCorruptState, 6},
		{"max instances of another profile", func(b []byte) []byte { le.PutUint16(b[6:], 8); return withCRC(b) }, ErrIncompatibleState, 0},
		{"negative debt", put64(8, -1), ErrCorruptState, 8},
		{"debt above MaxOvershootDebt", put64(8, int64(MaxOvershootDebt+1)), ErrCorruptState, 8},
		{"eligibility too far ahead", put64(16, int64(maxEligibleAhead+1)), ErrCorruptState, 16},
		{"eligibility too far behind", put64(16, -int64(maxEligibleAhead+1)), ErrCorruptState, 16},
		{"credit above an hour", put64(24, int64(maxLead+1)), ErrCorruptState, 24},
		{"zero work", put64(job0+8, 0), ErrCorruptState, job0 + 8},
		{"work above MaxJobWork", put64(job0+8, int64(MaxJobWork+1)), ErrCorruptState, job0 + 8},
		{"progress equal to work", put64(job0+16, int64(10*ms)), ErrCorruptState, job0 + 16},
		{"negative progress", put64(job0+16, -1), ErrCorruptState, job0 + 16},
		{"chunk above MaxChunk", put64(job0+24, int64(MaxChunk+1)), ErrCorruptState, job0 + 24},
		{"negative age", put64(job0+32, -1), ErrCorruptState, job0 + 32},
		{"jobs out of submission order", put64(job1+32, int64(time.Hour)), ErrCorruptState, job1 + 32},
		{"started before submitted", put64(job0+40, int64(time.Hour)), ErrCorruptState, job0 + 40},
		{"second job has run", put64(job1+40, 0), ErrCorruptState, job1 + 16},
		{"progress without a start", put64(job0+40, notStarted), ErrCorruptState, job0 + 40},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			s, id, data := savedState(t)
			if tc.corrupt == nil { // a valid state, too long for the destination
				d, _ := New(Config{MaxQueue: 1})
				nid, _ := d.AddTenant(6)
				if err := d.RestoreTenant(nid, data); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				return
			}
			before, _ := s.Tenant(id)
			err := s.RestoreTenant(id, tc.corrupt(bytes.Clone(data)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var ce *CorruptStateError
			if errors.As(err, &ce) && ce.Offset != tc.offset {
				t.Errorf("offset %d (%v), want %d", ce.Offset, err, tc.offset)
			}
			if after, _ := s.Tenant(id); after != before {
				t.Errorf("a failed restore changed the tenant: %+v -> %+v", before, after)
			}
		})
	}
}

// The offset test above hard-codes where the checksum sits; make sure the
// flipped-bit case really is the checksum's doing.
func TestRestoreFlippedBitCaughtByChecksum(t *testing.T) {
	s, id, data := savedState(t)
	data[stateHeaderSize+3] ^= 4
	var ce *CorruptStateError
	if err := s.RestoreTenant(id, data); !errors.As(err, &ce) || ce.Reason != "checksum mismatch" {
		t.Fatalf("got %v, want a checksum mismatch", err)
	}
}

func TestSaveUnknownTenant(t *testing.T) {
	s, _ := New(Config{})
	if _, err := s.SaveTenant(nil, 1); !errors.Is(err, ErrUnknownTenant) {
		t.Fatalf("got %v", err)
	}
}
