package sched_test

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// Two P40-4Q vGPUs (6 fit on a P40) share a GPU under equal share: each
// gets at most half of it, even while the other has nothing to do.
func Example() {
	s, err := sched.New(sched.Config{Policy: sched.EqualShare})
	if err != nil {
		panic(err)
	}
	a, _ := s.AddTenant(6)
	b, _ := s.AddTenant(6)
	_ = s.PowerOn(a)
	_ = s.PowerOn(b)
	_ = s.Submit(a, sched.Job{Work: 30 * time.Millisecond, Tag: 1})
	_ = s.Submit(b, sched.Job{Work: 5 * time.Millisecond, Tag: 2})

	var rep sched.Report
	if err := s.Advance(100*time.Millisecond, &rep); err != nil {
		panic(err)
	}
	fmt.Println(s.Config())
	for _, c := range rep.Completions {
		fmt.Printf("tenant %d job %d: %v of work done at %v, waited %v\n", c.Tenant, c.Tag, c.Work, c.Finished, c.QueueDelay())
	}
	fmt.Printf("GPU busy %v of %v: %.0f%%\n", rep.Busy, rep.End-rep.Start, 100*rep.Utilization())
	// Output:
	// vGPU scheduler: Equal Share, strict round-robin, averaging factor 33, time slice profile default (2 ms up to 8 vGPUs per GPU, 1 ms above)
	// tenant 2 job 2: 5ms of work done at 11ms, waited 2ms
	// tenant 1 job 1: 30ms of work done at 58ms, waited 0s
	// GPU busy 35ms of 100ms: 35%
}

// A tenant's scheduling state travels with a migrating VM: saved on the
// source during the stun, restored into the destination's tenant.
func ExampleScheduler_SaveTenant() {
	src, _ := sched.New(sched.Config{})
	id, _ := src.AddTenant(24) // a P40-1Q vGPU
	_ = src.PowerOn(id)
	_ = src.Submit(id, sched.Job{Work: 10 * time.Millisecond, Tag: 7})
	_ = src.Advance(4*time.Millisecond, nil)
	_ = src.Pause(id) // the stun
	state, _ := src.SaveTenant(nil, id)

	dst, _ := sched.New(sched.Config{Start: time.Hour})
	nid, _ := dst.AddTenant(24)
	_ = dst.PowerOn(nid)
	_ = dst.Pause(nid)
	if err := dst.RestoreTenant(nid, state); err != nil {
		panic(err)
	}
	_ = dst.Resume(nid)
	var rep sched.Report
	_ = dst.Advance(10*time.Millisecond, &rep)
	c := rep.Completions[0]
	fmt.Printf("%d-byte state; job %d finished %v after the resume, %v after submission\n",
		len(state), c.Tag, c.Finished-time.Hour, c.Latency())
	// Output: 88-byte state; job 7 finished 6ms after the resume, 10ms after submission
}

func ExampleDecodeRmPVMRL() {
	c, err := sched.DecodeRmPVMRL(0x1E1E0011, sched.LayoutRoundRobin)
	if err != nil {
		panic(err)
	}
	fmt.Println(c)
	// Output: vGPU scheduler: Fixed Share, strict round-robin, averaging factor 30, time slice 2.083 ms
}
