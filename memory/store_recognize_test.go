package memory

import (
	"testing"
)

// TestStorePageRecognizesGenerated: a Synthetic region stores a page whose
// bytes are a class's generated content for that page and generation as
// the class, holding no bytes for it, and one that differs by a byte, or
// is that content at another generation or page, as explicit bytes.
func TestStorePageRecognizesGenerated(t *testing.T) {
	const ps = 4096
	root, err := New(Config{SizeBytes: 64 * ps, Kind: Synthetic, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	win, err := root.Map(16, 16, 99)
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, ps)
	for _, tc := range []struct {
		name     string
		c        Class
		key      uint64 // the page whose content is stored at page 3
		gen      uint32 // the generation it is generated at
		flip     bool
		explicit bool
	}{
		{"weights", ClassWeights, 3, 5, false, false},
		{"activations", ClassActivations, 3, 5, false, false},
		{"text", ClassText, 3, 5, false, false},
		{"random", ClassRandom, 3, 5, false, false},
		{"training weights", ClassTrainingWeights, 3, 5, false, false},
		{"training weights at another generation", ClassTrainingWeights, 3, 4, false, true},
		{"a byte off", ClassText, 3, 5, true, true},
		{"another generation", ClassWeights, 3, 4, false, true},
		{"another page", ClassRandom, 4, 5, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Generate(page, tc.c, win.Seed(), tc.key, tc.gen)
			if tc.flip {
				page[ps-1] ^= 0x80
			}
			if err := win.StorePage(3, page, 5); err != nil {
				t.Fatal(err)
			}
			st, err := win.PageState(3)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, ps)
			if _, err := win.ReadPage(3, got); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(page) || st.Gen != 5 {
				t.Fatalf("reads back other bytes, or generation %d", st.Gen)
			}
			wantClass, wantResident := tc.c, int64(0)
			if tc.explicit {
				wantClass, wantResident = ClassExplicit, ps
			}
			if st.Class != wantClass || root.ResidentBytes() != wantResident {
				t.Fatalf("stored as %v with %d bytes resident, want %v and %d", st.Class, root.ResidentBytes(), wantClass, wantResident)
			}
		})
	}
}
