package vgpu_test

import (
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
