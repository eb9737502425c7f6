package memory

import (
	"reflect"
	"testing"
)

// TestMixPresetsAreCopies changes every part of every preset it is handed,
// through each way the package hands presets out, and checks that the next
// caller still gets the original: a preset is a default that every VM's RAM
// and every pattern fall back to, so no caller may change it for the others.
func TestMixPresetsAreCopies(t *testing.T) {
	presets := map[string]func() Mix{
		"zero": MixZero, "weights": MixWeights, "activations": MixActivations,
		"text": MixText, "random": MixRandom, "realistic": MixRealistic,
		"training-weights": MixTrainingWeights,
	}
	spoil := func(m Mix) {
		for i := range m.Parts {
			m.Parts[i] = MixPart{Class: ClassExplicit, Weight: 0}
		}
	}
	for name, preset := range presets {
		want := preset()
		if want.Name != name || want.Validate() != nil {
			t.Fatalf("%s: preset %+v", name, want)
		}
		spoil(preset())
		byName, err := MixByName(name)
		if err != nil {
			t.Fatal(err)
		}
		spoil(byName)
		for _, m := range Mixes() {
			spoil(m)
		}
		if got := preset(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: after changing copies the preset is %+v, want %+v", name, got, want)
		}
		if got, _ := MixByName(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: after changing copies MixByName gives %+v, want %+v", name, got, want)
		}
	}
	if got := MixRealistic().Parts; !reflect.DeepEqual(got, []MixPart{{ClassZero, 40}, {ClassWeights, 30}, {ClassText, 20}, {ClassRandom, 10}}) {
		t.Errorf("realistic mix %v", got)
	}
}
