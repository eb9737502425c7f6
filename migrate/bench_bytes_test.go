package migrate

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
)

// BenchmarkMigrateBytes is one Bytes-fidelity migration between synthetic
// hosts of a VM with ram of guest RAM in use (a realistic mix of content)
// and a P40-1Q's framebuffer: every page read, encoded, decoded, applied
// and verified. It reports the peak heap in MiB, which the destination's
// batch-by-batch apply and its recognition of generated pages keep far
// below the VM's size.
func BenchmarkMigrateBytes(b *testing.B) {
	for _, ramGiB := range []int64{1, 8} {
		b.Run(fmt.Sprintf("ram=%dGiB", ramGiB), func(b *testing.B) {
			b.SetBytes(ramGiB * GiB)
			b.ReportAllocs()
			var peak float64
			for range b.N {
				b.StopTimer()
				src, dst := hostPair(b, memory.Synthetic, 1)
				vm, err := src.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 2 * ramGiB * GiB, RAMFootprintBytes: ramGiB * GiB, Profiles: []string{"P40-1Q"}})
				must(b, err)
				must(b, vm.Start())
				runtime.GC()
				heap := migtest.StartPeakHeap(5 * time.Millisecond)
				b.StartTimer()
				rep, err := Migrate(vm, dst, Config{Fidelity: Bytes})
				b.StopTimer()
				peak = max(peak, heap.Stop())
				must(b, err)
				if rep.Outcome != PhaseDone {
					b.Fatalf("outcome %v", rep.Outcome)
				}
				b.StartTimer()
			}
			b.ReportMetric(peak, "peak-heap-MiB")
		})
	}
}
