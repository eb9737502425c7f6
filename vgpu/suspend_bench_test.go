package vgpu

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSuspendResume suspends an inference VM to a file on disk and
// resumes it on another host, then back, one way an iteration: a P40-8Q VM
// of 32 GiB of guest RAM, 4 GiB of it in use and its framebuffer full of
// weights, in compact form (runs of pages, the default on a Synthetic
// host), and a P40-1Q VM of 4 GiB, 512 MiB in use, as bytes. It reports
// the file's size in KiB; SetBytes is the VM's bytes in use.
func BenchmarkSuspendResume(b *testing.B) {
	for _, c := range []struct {
		name            string
		profile         string
		ramBytes, inUse int64
		bytes           bool
	}{
		{"form=compact/profile=P40-8Q", "P40-8Q", 32 * GiB, 4 * GiB, false},
		{"form=bytes/profile=P40-1Q", "P40-1Q", 4 * GiB, 512 * MiB, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			p, err := ParseProfile(c.profile)
			if err != nil {
				b.Fatal(err)
			}
			hosts := []*Host{newHost(b, HostConfig{Name: "a", Seed: 1}), newHost(b, HostConfig{Name: "b", Seed: 2})}
			inf, err := NewInference(InferenceConfig{Model: MobileNet(), FootprintBytes: p.UsableFramebufferBytes(), Seed: 3})
			if err != nil {
				b.Fatal(err)
			}
			vm := mustVM(b, hosts[0], VMSpec{ID: "vm", RAMBytes: c.ramBytes, RAMFootprintBytes: c.inUse, Profiles: []string{p.Name}, Workload: inf})
			must(b, vm.Start())
			for _, h := range hosts {
				advance(b, h, time.Second)
			}
			inUse := int64(0)
			for _, r := range vm.regions() {
				n, err := r.UsedBytes()
				must(b, err)
				inUse += n
			}
			path := filepath.Join(b.TempDir(), "vm.vmss")
			var size int64
			b.SetBytes(inUse)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				f, err := os.Create(path)
				must(b, err)
				w := bufio.NewWriterSize(f, 1<<20)
				must(b, vm.Suspend(w, SuspendOptions{Bytes: c.bytes}))
				must(b, w.Flush())
				st, err := f.Stat()
				must(b, err)
				size = st.Size()
				_, err = f.Seek(0, 0)
				must(b, err)
				vm, err = hosts[(i+1)%2].Resume(bufio.NewReaderSize(f, 1<<20), ResumeOptions{})
				must(b, err)
				must(b, f.Close())
			}
			b.ReportMetric(float64(size)/1024, "file-KiB")
		})
	}
}
