package vgpu_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// A host with two Tesla P40s serves the two MLaaS models of the GTC 2019
// talk "vMotion for NVIDIA GRID vGPU Virtual Machines" from three VMs with
// P40-8Q vGPUs, placed breadth-first, for ten simulated seconds.
func Example() {
	host, err := vgpu.NewHost(vgpu.HostConfig{Name: "esx-01", GPUs: 2, Seed: 1})
	if err != nil {
		panic(err)
	}
	for i, m := range []vgpu.Model{vgpu.InceptionV3(), vgpu.MobileNet(), vgpu.InceptionV3()} {
		w, err := vgpu.NewInference(vgpu.InferenceConfig{
			Model: m, RequestsPerSec: 100, FootprintBytes: 2 * vgpu.GiB, Seed: uint64(i + 1),
		})
		if err != nil {
			panic(err)
		}
		vm, err := host.CreateVM(vgpu.VMSpec{
			ID: fmt.Sprintf("mlaas-%d", i), RAMBytes: 16 * vgpu.GiB, RAMFootprintBytes: 2 * vgpu.GiB,
			Profiles: []string{"P40-8Q"}, Workload: w,
		})
		if err != nil {
			panic(err)
		}
		if err := vm.Start(); err != nil {
			panic(err)
		}
	}
	if err := host.Advance(10 * time.Second); err != nil {
		panic(err)
	}
	for _, vm := range host.VMs() {
		v := vm.VGPUs()[0]
		m := vm.Workload().Metrics(0, host.Now())
		fmt.Printf("%s on GPU %d slot %d (%s, %d MiB usable): %s\n",
			vm.ID(), v.GPU().Index(), v.Slot(), v.Profile(), v.UsableFramebufferBytes()>>20, m)
	}
	// Output:
	// mlaas-0 on GPU 0 slot 0 (P40-8Q, 7621 MiB usable): inference Inception V3: 1056 done, 0 dropped, 105.6/s, latency p50 6.321ms p99 39.311ms
	// mlaas-1 on GPU 1 slot 0 (P40-8Q, 7621 MiB usable): inference MobileNet: 967 done, 0 dropped, 96.7/s, latency p50 387µs p99 712µs
	// mlaas-2 on GPU 0 slot 1 (P40-8Q, 7621 MiB usable): inference Inception V3: 1004 done, 0 dropped, 100.4/s, latency p50 6.22ms p99 29.689ms
}

// Suspend a VM to a file and resume it on another host, one call each:
// Suspend writes the VM's spec, its workload's state, its memory and its
// vGPU's device state as one checkpoint stream and releases the VM;
// Resume makes the VM again on the other host, checks every record as it
// restores it, and runs it on. A VM on a synthetic host is written in
// compact form: runs of pages, a content class and a generation each.
func Example_suspendResume() {
	src, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-a", Seed: 1})
	dst, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-b", Seed: 2})
	inf, _ := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.MobileNet(), RequestsPerSec: 50,
		FootprintBytes: 6 * vgpu.GiB, RAMWorkingSetBytes: 1 * vgpu.GiB, Seed: 3})
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "svc-1", RAMBytes: 32 * vgpu.GiB, RAMFootprintBytes: 4 * vgpu.GiB,
		Profiles: []string{"P40-8Q"}, Workload: inf})
	if err != nil {
		panic(err)
	}
	if err := vm.Start(); err != nil {
		fmt.Println(err)
		return
	}
	_ = src.Advance(2 * time.Second)

	inUse, _ := vm.RAM().UsedBytes()
	for _, fb := range vm.Framebuffers() {
		n, _ := fb.UsedBytes()
		inUse += n
	}
	var file bytes.Buffer // an os.File in practice
	if err := vm.Suspend(&file, vgpu.SuspendOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("suspended %s, %.1f GiB in use, to %.1f KiB; %s holds %d VMs\n",
		vm.ID(), float64(inUse)/(1<<30), float64(file.Len())/(1<<10), src.Name(), len(src.VMs()))

	_ = dst.Advance(src.Now()) // the other host's clock may differ too
	back, err := dst.Resume(&file, vgpu.ResumeOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("resumed on %s: %v\n", back.Host().Name(), back.State())
	from := dst.Now()
	_ = dst.Advance(time.Second)
	fmt.Println("the next second:", back.Workload().Metrics(from, dst.Now()))
	// Output:
	// suspended svc-1, 11.0 GiB in use, to 24.7 KiB; esx-a holds 0 VMs
	// resumed on esx-b: running
	// the next second: inference MobileNet: 46 done, 0 dropped, 46.0/s, latency p50 387µs p99 387µs
}
