package vgpu_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
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

// Suspend a VM to a file and resume it on another host, through package
// checkpoint: pause it, save its guest RAM, its framebuffer and its vGPU's
// device state as one stream, then prepare an empty VM of the same shape
// on the other host, restore the stream into it (Restore checks every
// region's digest end to end), load the device state and resume it. The
// workload moves with it and serves on.
func Example_suspendResume() {
	src, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-a", Seed: 1})
	dst, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-b", Seed: 2})
	inf, _ := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.MobileNet(), RequestsPerSec: 50,
		FootprintBytes: 16 << 20, RAMWorkingSetBytes: 8 << 20, Seed: 3})
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "svc-1", RAMBytes: 64 << 20, RAMFootprintBytes: 8 << 20,
		Profiles: []string{"P40-1Q"}, Workload: inf})
	if err != nil {
		panic(err)
	}
	if err := vm.Start(); err != nil {
		fmt.Println(err)
		return
	}
	_ = src.Advance(2 * time.Second)

	// Suspend: stop the VM where it is and write it out.
	_ = vm.Pause()
	blobs, _ := vm.SaveDeviceStates()
	snap := checkpoint.Snapshot{VMID: vm.ID(), GPUModel: vm.GPUModel()}
	for _, p := range vm.Profiles() {
		snap.Profiles = append(snap.Profiles, p.Name)
	}
	for i, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		snap.Regions = append(snap.Regions, checkpoint.RegionRef{ID: uint32(i), Region: r})
	}
	for i, b := range blobs {
		snap.Devices = append(snap.Devices, checkpoint.DeviceState{Device: uint32(i), Version: vgpu.StateVersion, Data: b})
	}
	var file bytes.Buffer // an os.File in practice
	if err := checkpoint.Save(&file, snap, checkpoint.WriterOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("suspended %s: %d regions, %d device state, %.1f MiB on disk\n",
		vm.ID(), len(snap.Regions), len(snap.Devices), float64(file.Len())/(1<<20))

	// Resume on the other host: an empty VM of the same shape, the
	// stream restored into its regions, then its device state.
	in, err := dst.PrepareIncoming(vm.IncomingSpec())
	if err != nil {
		fmt.Println(err)
		return
	}
	var refs []checkpoint.RegionRef
	for i, r := range append([]*memory.Region{in.RAM()}, in.Framebuffers()...) {
		refs = append(refs, checkpoint.RegionRef{ID: uint32(i), Region: r})
	}
	res, err := checkpoint.Restore(&file, refs, checkpoint.ReaderOptions{})
	devices := res.Devices
	if err != nil {
		_ = in.Abort()
		fmt.Println(err)
		return
	}
	states := make([][]byte, len(in.VGPUs()))
	for _, d := range devices {
		if int(d.Device) < len(states) {
			states[d.Device] = d.Data
		}
	}
	if err := in.Restore(states); err != nil {
		_ = in.Abort()
		fmt.Println(err)
		return
	}
	for i, r := range refs {
		diff, _ := memory.FirstDiff(snap.Regions[i].Region, r.Region)
		fmt.Printf("region %d: first difference %d\n", i, diff)
	}
	if err := vm.HandOverWorkload(in); err != nil {
		fmt.Println(err)
		return
	}
	_ = vm.Destroy()
	if err := in.Resume(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("resumed on %s: %v\n", in.Host().Name(), in.State())

	from := dst.Now()
	_ = dst.Advance(time.Second)
	fmt.Println("the next second:", in.Workload().Metrics(from, dst.Now()))
	// Output:
	// suspended svc-1: 2 regions, 1 device state, 16.8 MiB on disk
	// region 0: first difference -1
	// region 1: first difference -1
	// resumed on esx-b: running
	// the next second: inference MobileNet: 46 done, 0 dropped, 46.0/s, latency p50 387µs p99 387µs
}
