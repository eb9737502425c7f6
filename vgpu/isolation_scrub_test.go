package vgpu

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// secretChunkBytes is the unit in which a secret is written and memory
// is read back.
const secretChunkBytes = 1 << 20

// secret is a tenant's confidential content: byte o of a region holds
// chunk[o mod secretChunkBytes], seeded non-zero bytes.
type secret struct{ chunk []byte }

func newSecret(seed uint64) secret {
	rng := rand.New(rand.NewPCG(seed, 0x5ec7e7))
	c := make([]byte, secretChunkBytes)
	for i := range c {
		c[i] = byte(rng.Uint32()) | 1
	}
	return secret{c}
}

// at returns the secret's n bytes from off.
func (s secret) at(off int64, n int) []byte {
	if i := int(off % secretChunkBytes); i+n <= secretChunkBytes {
		return s.chunk[i : i+n]
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = s.chunk[(off+int64(i))%secretChunkBytes]
	}
	return out
}

// secretRuns are the byte ranges a tenant writes its secret over in a
// region of size bytes: all of it, or, where writing a whole framebuffer
// costs too long, the 64 bytes each side of every page boundary, which
// reach the head and the tail of every page.
func secretRuns(size, pageSize int64, whole bool) [][2]int64 {
	var out [][2]int64
	if whole {
		for off := int64(0); off < size; off += secretChunkBytes {
			out = append(out, [2]int64{off, min(off+secretChunkBytes, size)})
		}
		return out
	}
	const w = 64
	out = append(out, [2]int64{0, w})
	for end := pageSize; end <= size; end += pageSize {
		out = append(out, [2]int64{end - w, min(end+w, size)})
	}
	return out
}

// write writes the secret over runs through write.
func (s secret) write(t *testing.T, write func([]byte, int64) (int, error), runs [][2]int64) {
	t.Helper()
	for _, r := range runs {
		if _, err := write(s.at(r[0], int(r[1]-r[0])), r[0]); err != nil {
			t.Fatalf("writing the secret at %d: %v", r[0], err)
		}
	}
}

// holdsNoSecret reads runs through read and fails t if any byte is not
// zero.
func holdsNoSecret(t *testing.T, what string, read func([]byte, int64) (int, error), runs [][2]int64) {
	t.Helper()
	buf := make([]byte, secretChunkBytes)
	for _, r := range runs {
		b := buf[:r[1]-r[0]]
		if _, err := read(b, r[0]); err != nil {
			t.Fatalf("%s: reading at %d: %v", what, r[0], err)
		}
		if !memory.IsZero(b) {
			t.Fatalf("%s: bytes [%d, %d) are not zero", what, r[0], r[1])
		}
	}
}

// expectedBytes is a byte range of a region a check treats apart.
type expectedBytes struct {
	off  int64
	want []byte // the bytes it must hold
}

// readsClean reads size bytes through read and fails t unless they are
// zero outside the spans, each expectedBytes holding what it says.
func readsClean(t *testing.T, what string, read func([]byte, int64) (int, error), size int64, s secret, spans ...expectedBytes) {
	t.Helper()
	buf := make([]byte, secretChunkBytes)
	for off := int64(0); off < size; off += secretChunkBytes {
		b := buf[:min(secretChunkBytes, size-off)]
		if n, err := read(b, off); err != nil || n != len(b) {
			t.Fatalf("%s: reading %d bytes at %d: %d, %v", what, len(b), off, n, err)
		}
		for _, sp := range spans {
			lo, hi := max(sp.off, off), min(sp.off+int64(len(sp.want)), off+int64(len(b)))
			if lo >= hi {
				continue
			}
			if !bytes.Equal(b[lo-off:hi-off], sp.want[lo-sp.off:hi-sp.off]) {
				t.Fatalf("%s: bytes [%d, %d) are not what the tenant wrote", what, lo, hi)
			}
			clear(b[lo-off : hi-off])
		}
		if !memory.IsZero(b) {
			i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 })
			leak := bytes.Equal(b, s.at(off, len(b)))
			t.Fatalf("%s: byte %d is not zero (the whole chunk is the old tenant's secret: %v)", what, off+int64(max(i, 0)), leak)
		}
	}
}

// onePageSecretFree checks that the page at off of a region does not hold
// the secret: a page the next tenant's own device filled at its start.
func onePageSecretFree(t *testing.T, what string, r *memory.Region, off int64, s secret) {
	t.Helper()
	page := make([]byte, r.PageSize())
	if _, err := r.ReadAt(page, off); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(page, s.at(off, len(page))) {
		t.Fatalf("%s: the device page at %d holds the old tenant's secret", what, off)
	}
}

// TestSecretScrubbedAfterDestroy: tenant A writes a secret over its guest
// RAM and its framebuffer (all of it on the first backing, stripes in
// every page on the others) and is destroyed. At once its stale handles
// fail with memory.ErrUnmapped (reads and writes) or read zeros (guest
// RAM, scrubbed and released), and the GPU's framebuffer reads zeros where
// the secret was. Tenant B, placed next at the same GPU, slot and offset,
// reads zeros everywhere but what it and its own device wrote, in its
// whole framebuffer and guest RAM; a write through A's stale handle does
// not reach it; the neighbours in the slots either side are untouched.
// Dense holds a GPU's framebuffer in full, so its GPU is a P40 cut to one
// slot of the profile.
func TestSecretScrubbedAfterDestroy(t *testing.T) {
	oneSlot := P40()
	oneSlot.FramebufferBytes = GiB
	cases := []struct {
		name  string
		cfg   HostConfig
		whole bool
	}{
		{"sparse/whole-framebuffer", HostConfig{Memory: memory.Sparse}, true},
		{"synthetic", HostConfig{Memory: memory.Synthetic}, false},
		{"dense", HostConfig{Memory: memory.Dense, GPU: oneSlot, RAMBytes: 64 * MiB}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.Memory == memory.Dense && (isolationRace || testing.Short()) {
				// Every scrub of a dense 1 GiB window touches all of it,
				// three seconds of the run here.
				t.Skip("dense backing: skipped in short mode and under the race detector")
			}
			tc.cfg.Name, tc.cfg.Seed = "scrub", uint64(i+1)
			// Under the race detector a whole 1 GiB write is too slow.
			scrubCase(t, tc.cfg, newSecret(uint64(i+1)), tc.whole && !isolationRace)
		})
	}
}

func scrubCase(t *testing.T, cfg HostConfig, s secret, whole bool) {
	const profile, ramBytes = "P40-1Q", 16 * MiB
	h := newHost(t, cfg)
	// Where the GPU has room, A sits between two neighbours, which write
	// their own bytes at both edges of their windows.
	roomy := h.GPU(0).Framebuffer().Size() >= 3*GiB
	var neighbours []*VGPU
	edge := []byte("neighbour's own bytes")
	addNeighbour := func(id string) {
		n := mustVM(t, h, VMSpec{ID: id, RAMBytes: ramBytes, Profiles: []string{profile}})
		must(t, n.Start())
		v := n.VGPUs()[0]
		for _, off := range []int64{0, v.Profile().FramebufferBytes - int64(len(edge))} {
			if _, err := v.WriteAt(edge, off); err != nil {
				t.Fatal(err)
			}
		}
		neighbours = append(neighbours, v)
	}
	if roomy {
		addNeighbour("left")
	}
	a := mustVM(t, h, VMSpec{ID: "a", RAMBytes: ramBytes, Profiles: []string{profile}})
	must(t, a.Start())
	va := a.VGPUs()[0]
	size, g := va.Profile().FramebufferBytes, va.GPU()
	if roomy {
		addNeighbour("right")
		if neighbours[0].Slot() != va.Slot()-1 || neighbours[1].Slot() != va.Slot()+1 {
			t.Fatalf("neighbours in slots %d and %d, A in %d", neighbours[0].Slot(), neighbours[1].Slot(), va.Slot())
		}
	}
	fbRuns := secretRuns(size, int64(va.Framebuffer().PageSize()), whole)
	ramRuns := secretRuns(ramBytes, ramBytes, true)
	s.write(t, va.WriteAt, fbRuns)
	s.write(t, a.RAM().WriteAt, ramRuns)
	fbA, ramA := va.Framebuffer(), a.RAM()
	slot, first := va.Slot(), fbA.FirstPage()
	must(t, a.Destroy())

	for _, op := range []struct {
		name string
		err  func() error
	}{
		{"device read", func() error { _, err := va.ReadAt(make([]byte, 8), 0); return err }},
		{"device write", func() error { _, err := va.WriteAt([]byte{1}, 0); return err }},
		{"region read", func() error { _, err := fbA.ReadAt(make([]byte, 8), size-8); return err }},
		{"region page", func() error { _, err := fbA.ReadPage(0, make([]byte, fbA.PageSize())); return err }},
	} {
		if err := op.err(); !errors.Is(err, memory.ErrUnmapped) {
			t.Fatalf("%s through a destroyed tenant's window: %v, want memory.ErrUnmapped", op.name, err)
		}
	}
	holdsNoSecret(t, "stale guest RAM of A", ramA.ReadAt, ramRuns)
	base := int64(first) * int64(fbA.PageSize())
	holdsNoSecret(t, "GPU framebuffer where A's secret was", func(p []byte, off int64) (int, error) {
		return g.Framebuffer().ReadAt(p, base+off)
	}, fbRuns)

	b := mustVM(t, h, VMSpec{ID: "b", RAMBytes: ramBytes, Profiles: []string{profile}})
	must(t, b.Start())
	vb := b.VGPUs()[0]
	if vb.GPU() != g || vb.Slot() != slot || vb.Framebuffer().FirstPage() != first {
		t.Fatalf("B placed on GPU %d slot %d page %d; A had GPU %d slot %d page %d",
			vb.GPU().Index(), vb.Slot(), vb.Framebuffer().FirstPage(), g.Index(), slot, first)
	}
	if _, err := va.WriteAt(s.at(0, 64), 0); !errors.Is(err, memory.ErrUnmapped) {
		t.Fatalf("writing through A's stale device over B's window: %v, want memory.ErrUnmapped", err)
	}
	mark := []byte("B's own bytes")
	markAt := size/2 + 1000 // clear of the secret's runs
	if _, err := vb.WriteAt(mark, markAt); err != nil {
		t.Fatal(err)
	}
	spans := []expectedBytes{{off: markAt, want: mark}}
	for _, off := range devicePages(t, vb) {
		onePageSecretFree(t, "B's framebuffer", vb.Framebuffer(), off, s)
		spans = append(spans, expectedBytes{off: off, want: readPage(t, vb.Framebuffer(), off)})
	}
	if cfg.Memory == memory.Dense {
		// Reading a whole dense window costs seconds here; the secret was
		// only in its runs.
		holdsNoSecret(t, "B's framebuffer", vb.ReadAt, outside(fbRuns, spans))
	} else {
		readsClean(t, "B's framebuffer", vb.ReadAt, size, s, spans...)
	}
	readsClean(t, "B's guest RAM", b.RAM().ReadAt, ramBytes, s)
	for _, n := range neighbours {
		for _, off := range []int64{0, size - int64(len(edge))} {
			got := make([]byte, len(edge))
			if _, err := n.ReadAt(got, off); err != nil || !bytes.Equal(got, edge) {
				t.Fatalf("the neighbour in slot %d, bytes at %d: %q, %v", n.Slot(), off, got, err)
			}
		}
	}
}

// outside returns the runs that overlap none of the spans.
func outside(runs [][2]int64, spans []expectedBytes) [][2]int64 {
	var out [][2]int64
	for _, r := range runs {
		clash := false
		for _, sp := range spans {
			clash = clash || r[0] < sp.off+int64(len(sp.want)) && sp.off < r[1]
		}
		if !clash {
			out = append(out, r)
		}
	}
	return out
}

// readPage returns the bytes of the page at off of r.
func readPage(t *testing.T, r *memory.Region, off int64) []byte {
	t.Helper()
	p := make([]byte, r.PageSize())
	if _, err := r.ReadAt(p, off); err != nil {
		t.Fatal(err)
	}
	return p
}
