package migrate

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

func TestSmoke(t *testing.T) {
	for _, fid := range []Fidelity{Bytes, Model} {
		for _, mode := range []Mode{PreCopy, Legacy} {
			src, dst := hostPair(t, memory.Sparse, 1)
			vm := inferenceVM(t, src, "vm", "P40-1Q", 256*MiB, 256*MiB, tinyModel, 1)
			must(t, src.Advance(time.Second))
			must(t, dst.Advance(time.Second))
			rep, err := Migrate(vm, dst, Config{Mode: mode, Fidelity: fid})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
		}
	}
}
