package sched

import (
	"fmt"
	"time"
)

// Job is an amount of GPU work a tenant submits.
type Job struct {
	// Work is how long the job takes with the whole GPU to itself, in
	// (0, MaxJobWork]. A job that does not fit in its tenant's slice is
	// preempted at the slice's end and resumed at its next turn.
	Work time.Duration

	// Chunk is the job's preemption granularity, in [0, MaxChunk]: the GPU
	// can stop the job only after whole chunks of work (think of a kernel
	// that runs to completion once launched). A preemption at a slice's end
	// therefore lets the job run on to its next chunk boundary; that extra
	// time is the tenant's overshoot. Zero means the job stops exactly at
	// the slice's end.
	Chunk time.Duration

	// Tag is the caller's, returned untouched in the job's Completion.
	Tag uint64
}

func (j Job) validate() error {
	if j.Work <= 0 || j.Work > MaxJobWork {
		return fmt.Errorf("%w: work %v outside (0, %v]", ErrInvalidJob, j.Work, MaxJobWork)
	}
	if j.Chunk < 0 || j.Chunk > MaxChunk {
		return fmt.Errorf("%w: chunk %v outside [0, %v]", ErrInvalidJob, j.Chunk, MaxChunk)
	}
	return nil
}

// Completion reports a finished job. Times are on the scheduler's clock.
type Completion struct {
	Tenant    TenantID
	Tag       uint64
	Work      time.Duration // the job's Work
	Submitted time.Duration // when Submit queued it
	Started   time.Duration // when it first ran on the GPU
	Finished  time.Duration // when its last piece of work ran
}

// QueueDelay is how long the job waited before it first ran.
func (c Completion) QueueDelay() time.Duration { return c.Started - c.Submitted }

// Latency is how long the job took from submission to completion.
func (c Completion) Latency() time.Duration { return c.Finished - c.Submitted }

// job is a queued Job and its progress.
type job struct {
	tag       uint64
	work      time.Duration
	done      time.Duration // work already run, in [0, work)
	chunk     time.Duration
	submitted time.Duration
	started   time.Duration // valid when hasRun
	hasRun    bool
}

// remaining is the work the job still needs.
func (j *job) remaining() time.Duration { return j.work - j.done }

// toChunkBoundary is the work left before the job may be preempted: zero
// when it sits on a chunk boundary, and never past the job's end.
func (j *job) toChunkBoundary() time.Duration {
	if j.chunk == 0 {
		return 0
	}
	into := j.done % j.chunk
	if into == 0 {
		return 0
	}
	return min(j.chunk-into, j.work-j.done)
}

// jobQueue is a FIFO ring of jobs. It grows by doubling up to the
// scheduler's MaxQueue and never shrinks, so a steady stream of submissions
// and completions allocates nothing.
type jobQueue struct {
	buf  []job
	head int
	n    int
}

func (q *jobQueue) front() *job { return &q.buf[q.head] }

// at returns the i-th queued job, 0 being the front.
func (q *jobQueue) at(i int) *job {
	k := q.head + i
	if k >= len(q.buf) {
		k -= len(q.buf)
	}
	return &q.buf[k]
}

// push appends j; the caller has checked that fewer than limit jobs are
// queued, and the buffer never grows past limit.
func (q *jobQueue) push(j job, limit int) {
	if q.n == len(q.buf) {
		q.grow(min(max(4, 2*len(q.buf)), limit))
	}
	k := q.head + q.n
	if k >= len(q.buf) {
		k -= len(q.buf)
	}
	q.buf[k] = j
	q.n++
}

func (q *jobQueue) pop() {
	q.buf[q.head] = job{}
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.n--
}

// grow re-lays the queue, front first, into a buffer of at least size jobs.
func (q *jobQueue) grow(size int) {
	nb := make([]job, size)
	for i := range q.n {
		nb[i] = *q.at(i)
	}
	q.buf, q.head = nb, 0
}

// clear drops every job and keeps the buffer.
func (q *jobQueue) clear() {
	for q.n > 0 {
		q.pop()
	}
	q.head = 0
}

// total is the work the queue still needs.
func (q *jobQueue) total() time.Duration {
	var sum time.Duration
	for i := range q.n {
		sum += q.at(i).remaining()
	}
	return sum
}
