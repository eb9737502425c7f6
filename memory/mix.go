package memory

import "fmt"

// MixPart is one class of a Mix and its weight.
type MixPart struct {
	Class  Class
	Weight uint32
}

// Mix assigns each page a content class by ratio. The class of a page is a
// pure function of (seed, page), so a page keeps its class across
// rewrites: a page of weights stays weights.
type Mix struct {
	Name  string
	Parts []MixPart
}

// The standard mixes. Each call returns a fresh Mix with a Parts slice of
// its own: the presets are defaults that workloads and patterns fall back
// to, so a caller that changes the Mix it was handed must not change anyone
// else's.

// MixZero is all zero pages.
func MixZero() Mix { return single("zero", ClassZero) }

// MixWeights is all model-weight pages.
func MixWeights() Mix { return single("weights", ClassWeights) }

// MixTrainingWeights is all pages of model weights under training
// (ClassTrainingWeights): each rewrite of a page changes its floats by
// about one optimizer step.
func MixTrainingWeights() Mix { return single("training-weights", ClassTrainingWeights) }

// MixActivations is all activation pages.
func MixActivations() Mix { return single("activations", ClassActivations) }

// MixText is all text-like pages.
func MixText() Mix { return single("text", ClassText) }

// MixRandom is all random pages.
func MixRandom() Mix { return single("random", ClassRandom) }

// MixRealistic follows the mixed corpus the copy path is tuned on: 40 %
// zero, 30 % weights, 20 % text, 10 % random. Assumption: round shares
// for a guest of an ML service, because no published content census of
// such guests was found: much of a guest's memory is never written or
// freed (zero), model weights are cached in RAM as well as in the
// framebuffer, text stands for code, logs and documents, and random for
// compressed or encrypted data. The zero share matters most: zero pages
// cost no wire bytes.
func MixRealistic() Mix {
	return Mix{Name: "realistic", Parts: []MixPart{
		{ClassZero, 40}, {ClassWeights, 30}, {ClassText, 20}, {ClassRandom, 10},
	}}
}

func single(name string, c Class) Mix { return Mix{Name: name, Parts: []MixPart{{c, 1}}} }

// Mixes returns the standard mixes that benchmarks compare, in a fixed
// order: zero, weights, text, random, realistic, training-weights.
func Mixes() []Mix {
	return []Mix{MixZero(), MixWeights(), MixText(), MixRandom(), MixRealistic(), MixTrainingWeights()}
}

// MixByName returns the standard mix with the given name (any of Mixes, or
// "activations").
func MixByName(name string) (Mix, error) {
	for _, m := range append(Mixes(), MixActivations()) {
		if m.Name == name {
			return m, nil
		}
	}
	return Mix{}, configError("unknown mix %q", name)
}

// Validate reports whether m has at least one part, a positive total
// weight and only generated classes.
func (m Mix) Validate() error {
	var total uint64
	for _, p := range m.Parts {
		if !p.Class.Generated() {
			return fmt.Errorf("%w: mix %q uses class %v", ErrClass, m.Name, p.Class)
		}
		total += uint64(p.Weight)
	}
	if total == 0 || total > 1<<32 {
		return configError("mix %q has total weight %d", m.Name, total)
	}
	return nil
}

// ClassOf returns the class of page under seed. m must be valid.
func (m Mix) ClassOf(seed, page uint64) Class {
	if len(m.Parts) == 1 {
		return m.Parts[0].Class
	}
	k := m.picker(seed)
	return k.classOf(page)
}

// mixPicker is a valid Mix bound to a seed, with the seed's half of the
// hash and the total weight worked out once for the many pages of a run.
type mixPicker struct {
	parts    []MixPart
	seedHash uint64
	total    uint64
}

func (m Mix) picker(seed uint64) mixPicker {
	k := mixPicker{parts: m.Parts, seedHash: mix64(seed ^ 0x6a09e667f3bcc909)}
	for _, p := range m.Parts {
		k.total += uint64(p.Weight)
	}
	return k
}

// classOf is Mix.ClassOf of page for the picker's mix and seed.
func (k *mixPicker) classOf(page uint64) Class {
	x := mix64(k.seedHash^page) % k.total
	for _, p := range k.parts {
		if x < uint64(p.Weight) {
			return p.Class
		}
		x -= uint64(p.Weight)
	}
	return k.parts[len(k.parts)-1].Class
}
