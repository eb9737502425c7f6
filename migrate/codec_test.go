package migrate

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// codecCosts are costs shaped like the realistic mix's on two cores: S2
// twice as fast as zstd and a little less tight, no compression half the
// raw bytes on the wire (zero pages are never sent).
var codecCosts = []CodecCost{
	{Level: checkpoint.LevelNone, WirePerRaw: 0.60},
	{Level: checkpoint.LevelS2, EncodeBytesPerSec: 1.7e9, WirePerRaw: 0.31},
	{Level: checkpoint.LevelFastest, EncodeBytesPerSec: 0.8e9, WirePerRaw: 0.29},
}

// TestChooseLevel: the documented facts of the adaptive codec's rule.
func TestChooseLevel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		link    float64
		workers int
		costs   []CodecCost
		want    checkpoint.Level
	}{
		{"1 Gbit/s: the tightest codec", 125e6, 2, codecCosts, checkpoint.LevelFastest},
		{"10 Gbit/s: zstd's encoders are the limit, S2's are not", 1.25e9, 2, codecCosts, checkpoint.LevelS2},
		{"10 Gbit/s on 8 cores: zstd keeps up", 1.25e9, 8, codecCosts, checkpoint.LevelFastest},
		{"40 Gbit/s: no compression", 5e9, 2, codecCosts, checkpoint.LevelNone},
		{"an unknown link: nothing limits uncompressed pages", 0, 2, codecCosts, checkpoint.LevelNone},
		{"no costs: zstd", 1e9, 1, nil, checkpoint.LevelFastest},
		{"within 2 %: the fewer bytes", 1e9, 1, []CodecCost{
			{Level: checkpoint.LevelS2, EncodeBytesPerSec: 1.0e9, WirePerRaw: 0.5},
			{Level: checkpoint.LevelFastest, EncodeBytesPerSec: 0.99e9, WirePerRaw: 0.4},
		}, checkpoint.LevelFastest},
		{"beyond 2 %: the faster", 1e9, 1, []CodecCost{
			{Level: checkpoint.LevelS2, EncodeBytesPerSec: 1.0e9, WirePerRaw: 0.5},
			{Level: checkpoint.LevelFastest, EncodeBytesPerSec: 0.9e9, WirePerRaw: 0.4},
		}, checkpoint.LevelS2},
		{"unlimited and limited: the unlimited", 0, 4, []CodecCost{
			{Level: checkpoint.LevelS2, EncodeBytesPerSec: 9e9, WirePerRaw: 0.3},
			{Level: checkpoint.LevelNone, WirePerRaw: 0.9},
		}, checkpoint.LevelNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseLevel(tc.link, tc.workers, tc.costs); got != tc.want {
				t.Fatalf("ChooseLevel = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCodecNames: every codec parses back from its name; others are
// refused.
func TestCodecNames(t *testing.T) {
	for c := CodecZstd; c <= CodecAuto; c++ {
		got, err := ParseCodec(c.String())
		if err != nil || got != c {
			t.Fatalf("ParseCodec(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := ParseCodec("lz4"); !errors.Is(err, ErrConfig) {
		t.Fatalf("ParseCodec(lz4): %v, want ErrConfig", err)
	}
}

// TestAdaptiveChooser: the chooser tries every level first, then follows
// ChooseLevel on what it measured, and comes back to the others now and
// then; modelled, it needs no clock.
func TestAdaptiveChooser(t *testing.T) {
	link := 125e6
	a := &AdaptiveChooser{Workers: 2, LinkBytesPerSec: func() float64 { return link }}
	wire := map[checkpoint.Level]float64{checkpoint.LevelNone: 0.6, checkpoint.LevelS2: 0.31, checkpoint.LevelFastest: 0.29}
	speed := map[checkpoint.Level]float64{checkpoint.LevelNone: 20e9, checkpoint.LevelS2: 1.7e9, checkpoint.LevelFastest: 0.8e9}
	const raw = 1 << 20
	step := func() checkpoint.Level {
		l := a.Level(BatchInfo{})
		a.Observe(BatchCost{Level: l, RawBytes: raw, WireBytes: int(wire[l] * raw), Encode: time.Duration(raw / speed[l] * float64(time.Second))})
		return l
	}
	seen := map[checkpoint.Level]int{}
	for range 2 * len(autoLevels) {
		seen[step()]++
	}
	if len(seen) != len(autoLevels) {
		t.Fatalf("the first batches tried %v, want every level", seen)
	}
	counts := func(n int) map[checkpoint.Level]int {
		c := map[checkpoint.Level]int{}
		for range n {
			c[step()]++
		}
		return c
	}
	if c := counts(64); c[checkpoint.LevelFastest] < 60 {
		t.Fatalf("at 1 Gbit/s the chooser sent %v, want zstd but for its probes", c)
	}
	link = 5e9
	if c := counts(64); c[checkpoint.LevelNone] < 58 {
		t.Fatalf("at 40 Gbit/s the chooser sent %v, want no compression but for its probes", c)
	}
	if a.Untimed() {
		t.Fatal("a measuring chooser says it needs no times")
	}
	if !(&AdaptiveChooser{Modelled: true}).Untimed() {
		t.Fatal("a modelled chooser asks for times")
	}
}

// codecWorld is a paused VM of 64 MiB of guest RAM in the realistic mix
// and a destination, on hosts of kind.
func codecWorld(t *testing.T, kind memory.Kind) (*vgpu.VM, *vgpu.Host) {
	t.Helper()
	var hosts [2]*vgpu.Host
	for i := range hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("h%d", i), Memory: kind, Seed: uint64(i + 1), RAMBytes: GiB})
		must(t, err)
		hosts[i] = h
	}
	vm, err := hosts[0].CreateVM(vgpu.VMSpec{ID: "codec", RAMBytes: 64 * MiB, RAMFootprintBytes: 64 * MiB, Profiles: []string{"P40-1Q"}})
	must(t, err)
	must(t, vm.RAM().FillMix(0, vm.RAM().Pages(), memory.MixRealistic()))
	must(t, vm.Start())
	must(t, vm.Pause())
	return vm, hosts[1]
}

// TestSimulatedAutoCodec: a simulated CodecAuto chooses as the rule says
// for its link — over 1 GbE the bytes of zstd, over 100 GbE those of no
// compression — in both fidelities, and gives the same report twice: it
// reads no clock.
func TestSimulatedAutoCodec(t *testing.T) {
	for _, fid := range []Fidelity{Model, Bytes} {
		for _, tc := range []struct {
			link Link
			like Codec
		}{{GbE1(), CodecZstd}, {GbE100(), CodecNone}} {
			t.Run(fmt.Sprintf("%v/%s", fid, tc.link.Name), func(t *testing.T) {
				wire := func(c Codec) (int64, *Report) {
					vm, dst := codecWorld(t, memory.Sparse)
					rep, err := Migrate(vm, dst, Config{Fidelity: fid, Link: tc.link, Codec: c})
					must(t, err)
					return rep.PreCopy.WireBytes, rep
				}
				auto, rep := wire(CodecAuto)
				again, rep2 := wire(CodecAuto)
				want, _ := wire(tc.like)
				if auto != again || rep.Stun != rep2.Stun || rep.Total != rep2.Total {
					t.Fatalf("two runs of CodecAuto differ: %d and %d wire bytes, stun %v and %v", auto, again, rep.Stun, rep2.Stun)
				}
				// Bytes fidelity tries every level on its first
				// batches, and again now and then.
				if d := float64(auto-want) / float64(want); d < -0.03 || d > 0.03 {
					t.Fatalf("CodecAuto sent %d bytes, %v %d (%+.1f %%)", auto, tc.like, want, 100*d)
				}
			})
		}
	}
}

// TestAdaptiveChooserMeasured: with a clock, the chooser keeps the level
// that achieves the most, whatever the rule says, and searches from the
// least compression up: where S2 clearly loses to none, it never tries
// zstd.
func TestAdaptiveChooserMeasured(t *testing.T) {
	for _, tc := range []struct {
		name     string
		perSec   map[checkpoint.Level]float64 // bytes a second each level achieves
		want     checkpoint.Level
		neverTry checkpoint.Level
	}{
		{"compression costs more than it saves", map[checkpoint.Level]float64{checkpoint.LevelNone: 2e9, checkpoint.LevelS2: 1.2e9, checkpoint.LevelFastest: 0.8e9}, checkpoint.LevelNone, checkpoint.LevelFastest},
		{"a slow link", map[checkpoint.Level]float64{checkpoint.LevelNone: 0.2e9, checkpoint.LevelS2: 0.24e9, checkpoint.LevelFastest: 0.26e9}, checkpoint.LevelFastest, 255},
		{"in between", map[checkpoint.Level]float64{checkpoint.LevelNone: 1.0e9, checkpoint.LevelS2: 1.2e9, checkpoint.LevelFastest: 0.8e9}, checkpoint.LevelS2, 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			// The rule alone would pick zstd: a slow link, fast encoders.
			a := &AdaptiveChooser{Workers: 2, LinkBytesPerSec: func() float64 { return 125e6 }, Now: func() time.Time { return now }}
			const raw = 1 << 20
			var pending []checkpoint.Level
			counts, tried := map[checkpoint.Level]int{}, map[checkpoint.Level]int{}
			for i := range 1000 {
				pending = append(pending, a.Level(BatchInfo{}))
				if len(pending) < 4 && i < 999 {
					continue // four batches in flight
				}
				l := pending[0]
				pending = pending[1:]
				now = now.Add(time.Duration(raw / tc.perSec[l] * float64(time.Second)))
				a.Observe(BatchCost{Level: l, RawBytes: raw, WireBytes: raw / 2, Encode: time.Millisecond})
				tried[l]++
				if i > 200 {
					counts[l]++
				}
			}
			if counts[tc.want] < 700 {
				t.Fatalf("sent %v after the first batches, want mostly %v", counts, tc.want)
			}
			if tried[tc.neverTry] > 0 {
				t.Fatalf("sent %v: tried %v, which the level before it beat", tried, tc.neverTry)
			}
		})
	}
}
