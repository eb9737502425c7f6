package sched

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzRestoreTenant feeds arbitrary bytes to RestoreTenant. Whatever it
// does, it must not panic; a refusal must be one of the documented errors
// and leave the tenant untouched; an accepted state must save back to the
// very same bytes and then run. With fixChecksum set, the fuzzer's bytes
// get a correct checksum, so that mutations reach the field checks behind
// it instead of all dying at the checksum.
func FuzzRestoreTenant(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, fixChecksum bool) {
		if fixChecksum && len(data) >= stateHeaderSize+stateTrailerSize {
			data = withCRC(bytes.Clone(data))
		}
		m := 6
		if len(data) >= 8 {
			if v := int(le.Uint16(data[6:])); v >= 1 && v <= MaxInstancesLimit {
				m = v // so that a state for any profile gets past the profile check
			}
		}
		s, err := New(Config{MaxQueue: MaxQueueLimit, Start: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := s.AddTenant(m)
		before, _ := s.Tenant(id)
		if err := s.RestoreTenant(id, data); err != nil {
			if !errors.Is(err, ErrCorruptState) && !errors.Is(err, ErrUnsupportedVersion) &&
				!errors.Is(err, ErrIncompatibleState) && !errors.Is(err, ErrQueueFull) {
				t.Fatalf("undocumented error: %v", err)
			}
			if after, _ := s.Tenant(id); after != before {
				t.Fatalf("a failed restore changed the tenant: %+v -> %+v", before, after)
			}
			return
		}
		out, err := s.SaveTenant(nil, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("accepted state saves back differently:\n in %x\nout %x", data, out)
		}
		if err := s.PowerOn(id); err != nil {
			t.Fatal(err)
		}
		var rep Report
		if err := s.Advance(time.Second, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Busy > time.Second {
			t.Fatalf("restored tenant ran %v in a second", rep.Busy)
		}
	})
}

// fuzzSeeds builds valid states in code: an empty tenant, a busy one with
// progress, overshoot debt and credit, and one for each P40 profile.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, m := range p40Slots {
		s, _ := New(Config{Policy: EqualShare, Slice: ms})
		id, _ := s.AddTenant(m)
		other, _ := s.AddTenant(m)
		_ = s.PowerOn(id)
		_ = s.PowerOn(other)
		data, err := s.SaveTenant(nil, id)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
		_ = s.Submit(id, Job{Work: 1500 * time.Microsecond, Chunk: 1500 * time.Microsecond, Tag: 1})
		_ = s.Submit(id, Job{Work: 7 * ms, Chunk: 300 * time.Microsecond, Tag: 2})
		_ = s.Submit(id, Job{Work: 3 * ms, Tag: 3})
		_ = s.Submit(other, Job{Work: time.Second})
		_ = s.Advance(5*ms, nil)
		if data, err = s.SaveTenant(nil, id); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	return seeds
}
