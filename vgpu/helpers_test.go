package vgpu

import (
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newHost(t tb, cfg HostConfig) *Host {
	t.Helper()
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustVM(t tb, h *Host, spec VMSpec) *VM {
	t.Helper()
	if spec.RAMBytes == 0 {
		spec.RAMBytes = 1 * GiB
	}
	vm, err := h.CreateVM(spec)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func must(t tb, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func advance(t tb, h *Host, d time.Duration) {
	t.Helper()
	must(t, h.Advance(d))
}

// samePages reports the first page where a and b differ in generation or
// class, or -1: a cheap equality for synthetic regions, whose content is a
// function of (seed, page, generation, class).
func samePages(t tb, a, b *memory.Region) int {
	t.Helper()
	if a.Pages() != b.Pages() || a.Seed() != b.Seed() {
		return 0
	}
	for p := range a.Pages() {
		sa, err := a.PageState(p)
		must(t, err)
		sb, err := b.PageState(p)
		must(t, err)
		if sa != sb {
			return p
		}
	}
	return -1
}

// copyRegion copies every page of src into dst, as a migration would: the
// bytes of explicit pages, the class of generated ones, with generations.
func copyRegion(t tb, dst, src *memory.Region) {
	t.Helper()
	buf := make([]byte, src.PageSize())
	for p := range src.Pages() {
		st, err := src.PageState(p)
		must(t, err)
		if st.Class.Generated() {
			must(t, dst.StoreGenerated(p, st.Class, st.Gen))
			continue
		}
		_, err = src.ReadPage(p, buf)
		must(t, err)
		must(t, dst.StorePage(p, buf, st.Gen))
	}
}
