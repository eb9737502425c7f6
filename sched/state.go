package sched

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// The saved form of a tenant's scheduling state; the package doc draws it.
const (
	stateVersion     = 1
	stateHeaderSize  = 36
	stateJobSize     = 48
	stateTrailerSize = 4
	// maxLead bounds the saved credit of the least-scheduled order: a
	// tenant more than an hour ahead of or behind its neighbours is
	// restored an hour ahead or behind, which is all the order can use.
	maxLead = time.Hour
	// maxEligibleAhead bounds how far ahead (or, usefully, behind) a
	// tenant's next turn can be: one period of the smallest share (the
	// most tenants, the longest slice).
	maxEligibleAhead = MaxInstancesLimit * MaxSlice
	// maxAge bounds a job's saved age, so that restoring it on any clock
	// in [0, MaxTime] and saving it again cannot overflow.
	maxAge     = MaxTime / 2
	notStarted = -1 // startedAgoNS of a job that has not run
)

var (
	stateMagic = [4]byte{'V', 'S', 'C', 'H'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	le         = binary.LittleEndian
)

// SaveTenant appends the tenant's scheduling state to dst and returns the
// extended slice: its queue (with each job's progress), its overshoot debt
// and its credit (when its next turn may start, and how its scheduled time
// stands against its neighbours'). Times are saved relative to the current
// time and to the neighbours, so the state can be restored on another
// scheduler with another clock. The state is at most
// 40 + 48*MaxQueueLimit bytes; the same state always saves to the same
// bytes.
func (s *Scheduler) SaveTenant(dst []byte, id TenantID) ([]byte, error) {
	_, t, err := s.lookup(id)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, stateMagic[:]...)
	dst = le.AppendUint16(dst, stateVersion)
	dst = le.AppendUint16(dst, uint16(t.maxInstances))
	dst = le.AppendUint64(dst, uint64(t.debt))
	// An eligibility more than the longest period in the past acts exactly
	// like one that far in the past (startTurn never lets the next lie
	// before the turn's start), so it is saved as that.
	dst = le.AppendUint64(dst, uint64(min(max(t.eligible-s.now, -maxEligibleAhead), maxEligibleAhead)))
	base, _ := s.leastScheduledOther(t)
	dst = le.AppendUint64(dst, uint64(min(max(t.scheduled-base, -maxLead), maxLead)))
	dst = le.AppendUint32(dst, uint32(t.q.n))
	for i := range t.q.n {
		j := t.q.at(i)
		started := time.Duration(notStarted)
		if j.hasRun {
			started = min(s.now-j.started, maxAge)
		}
		dst = le.AppendUint64(dst, j.tag)
		dst = le.AppendUint64(dst, uint64(j.work))
		dst = le.AppendUint64(dst, uint64(j.done))
		dst = le.AppendUint64(dst, uint64(j.chunk))
		dst = le.AppendUint64(dst, uint64(min(s.now-j.submitted, maxAge)))
		dst = le.AppendUint64(dst, uint64(started))
	}
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// RestoreTenant replaces the scheduling state of a tenant that is off or
// paused with state saved by SaveTenant (on this scheduler or another).
// Hostile bytes are safe: every length, range and ordering is checked, and
// the checksum verified, before anything is allocated or changed; on error
// the tenant is untouched. Errors wrap ErrCorruptState (a
// *CorruptStateError with the offending offset), ErrUnsupportedVersion,
// ErrIncompatibleState (saved for another profile) or ErrQueueFull (more
// jobs than this scheduler's MaxQueue). Jobs the tenant held before are
// discarded and counted as dropped.
func (s *Scheduler) RestoreTenant(id TenantID, data []byte) error {
	_, t, err := s.lookup(id)
	if err != nil {
		return err
	}
	if t.state == On {
		return &StateError{Op: "restore", Tenant: id, State: t.state}
	}
	h, err := checkState(data, t.maxInstances, s.cfg.MaxQueue)
	if err != nil {
		return err
	}
	t.dropped += uint64(t.q.n)
	t.q.clear()
	if len(t.q.buf) < h.count {
		t.q.grow(h.count)
	}
	for i := range h.count {
		r := data[stateHeaderSize+i*stateJobSize:]
		j := job{
			tag:       le.Uint64(r[0:]),
			work:      time.Duration(le.Uint64(r[8:])),
			done:      time.Duration(le.Uint64(r[16:])),
			chunk:     time.Duration(le.Uint64(r[24:])),
			submitted: s.now - time.Duration(le.Uint64(r[32:])),
		}
		if ago := time.Duration(le.Uint64(r[40:])); ago != notStarted {
			j.started, j.hasRun = s.now-ago, true
		}
		t.q.push(j, s.cfg.MaxQueue)
	}
	t.submitted += uint64(h.count)
	t.debt = h.debt
	t.eligible = s.now + h.eligibleIn
	base, _ := s.leastScheduledOther(t)
	t.scheduled = base + h.lead
	return nil
}

// stateHeader is the checked header of a saved state.
type stateHeader struct {
	count      int
	debt       time.Duration
	eligibleIn time.Duration
	lead       time.Duration
}

// checkState validates saved state completely, without allocating: the
// framing and checksum first, then every field. maxInstances and maxQueue
// are the restoring tenant's and scheduler's.
func checkState(data []byte, maxInstances, maxQueue int) (stateHeader, error) {
	var h stateHeader
	corrupt := func(off int, format string, args ...any) (stateHeader, error) {
		return stateHeader{}, &CorruptStateError{Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) < stateHeaderSize+stateTrailerSize {
		return corrupt(len(data), "truncated: %d bytes, a state has at least %d", len(data), stateHeaderSize+stateTrailerSize)
	}
	if [4]byte(data[:4]) != stateMagic {
		return corrupt(0, "bad magic %q", data[:4])
	}
	if v := le.Uint16(data[4:]); v != stateVersion {
		return h, fmt.Errorf("%w: version %d, this package reads %d", ErrUnsupportedVersion, v, stateVersion)
	}
	body := len(data) - stateTrailerSize
	if crc32.Checksum(data[:body], castagnoli) != le.Uint32(data[body:]) {
		return corrupt(body, "checksum mismatch")
	}
	n := le.Uint32(data[32:])
	if n > MaxQueueLimit {
		return corrupt(32, "%d jobs, the limit is %d", n, MaxQueueLimit)
	}
	h.count = int(n)
	if want := stateHeaderSize + h.count*stateJobSize + stateTrailerSize; len(data) != want {
		return corrupt(32, "%d jobs need %d bytes, have %d", h.count, want, len(data))
	}
	m := int(le.Uint16(data[6:]))
	if m < 1 || m > MaxInstancesLimit {
		return corrupt(6, "max instances %d outside [1, %d]", m, MaxInstancesLimit)
	}
	if m != maxInstances {
		return h, fmt.Errorf("%w: saved for %d instances per GPU, tenant has %d", ErrIncompatibleState, m, maxInstances)
	}
	h.debt = time.Duration(le.Uint64(data[8:]))
	if h.debt < 0 || h.debt > MaxOvershootDebt {
		return corrupt(8, "overshoot debt %v outside [0, %v]", h.debt, MaxOvershootDebt)
	}
	h.eligibleIn = time.Duration(le.Uint64(data[16:]))
	if h.eligibleIn < -maxEligibleAhead || h.eligibleIn > maxEligibleAhead {
		return corrupt(16, "eligibility %v outside [%v, %v]", h.eligibleIn, -maxEligibleAhead, maxEligibleAhead)
	}
	h.lead = time.Duration(le.Uint64(data[24:]))
	if h.lead < -maxLead || h.lead > maxLead {
		return corrupt(24, "credit %v outside [%v, %v]", h.lead, -maxLead, maxLead)
	}
	if h.count > maxQueue {
		return h, fmt.Errorf("%w: saved queue holds %d jobs, the limit is %d", ErrQueueFull, h.count, maxQueue)
	}
	prevAge := maxAge
	for i := range h.count {
		off := stateHeaderSize + i*stateJobSize
		r := data[off:]
		work := time.Duration(le.Uint64(r[8:]))
		done := time.Duration(le.Uint64(r[16:]))
		chunk := time.Duration(le.Uint64(r[24:]))
		age := time.Duration(le.Uint64(r[32:]))
		started := time.Duration(le.Uint64(r[40:]))
		switch {
		case work <= 0 || work > MaxJobWork:
			return corrupt(off+8, "job %d: work %v outside (0, %v]", i, work, MaxJobWork)
		case done < 0 || done >= work:
			return corrupt(off+16, "job %d: progress %v outside [0, %v)", i, done, work)
		case chunk < 0 || chunk > MaxChunk:
			return corrupt(off+24, "job %d: chunk %v outside [0, %v]", i, chunk, MaxChunk)
		case age < 0 || age > prevAge:
			return corrupt(off+32, "job %d: age %v outside [0, %v]: out of submission order", i, age, prevAge)
		case started != notStarted && (started < 0 || started > age):
			return corrupt(off+40, "job %d: started %v ago, submitted %v ago", i, started, age)
		case i > 0 && (done != 0 || started != notStarted):
			return corrupt(off+16, "job %d: only the front job can have run", i)
		case done > 0 && started == notStarted:
			return corrupt(off+40, "job %d: has progress but never started", i)
		}
		prevAge = age
	}
	return h, nil
}
