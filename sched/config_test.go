package sched

import (
	"errors"
	"testing"
	"time"
)

// The default time slice of every P40 Q profile: 2 ms (480 Hz) where at most
// 8 fit on the GPU, 1 ms (960 Hz) above 8.
func TestDefaultSlicePerP40Profile(t *testing.T) {
	for _, tc := range []struct {
		profile      string
		maxInstances int
		want         time.Duration
	}{
		{"P40-1Q: 24 per GPU, above 8 -> 1 ms", 24, time.Millisecond},
		{"P40-2Q: 12 per GPU, above 8 -> 1 ms", 12, time.Millisecond},
		{"P40-3Q: 8 per GPU, at most 8 -> 2 ms", 8, 2 * time.Millisecond},
		{"P40-4Q: 6 per GPU, at most 8 -> 2 ms", 6, 2 * time.Millisecond},
		{"P40-6Q: 4 per GPU, at most 8 -> 2 ms", 4, 2 * time.Millisecond},
		{"P40-8Q: 3 per GPU, at most 8 -> 2 ms", 3, 2 * time.Millisecond},
		{"P40-12Q: 2 per GPU, at most 8 -> 2 ms", 2, 2 * time.Millisecond},
		{"P40-24Q: 1 per GPU, at most 8 -> 2 ms", 1, 2 * time.Millisecond},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			if got := DefaultSlice(tc.maxInstances); got != tc.want {
				t.Errorf("DefaultSlice(%d) = %v, want %v", tc.maxInstances, got, tc.want)
			}
			// A tenant added with no configured slice gets the default.
			s, _ := New(Config{})
			id, err := s.AddTenant(tc.maxInstances)
			if err != nil {
				t.Fatal(err)
			}
			if info, _ := s.Tenant(id); info.Slice != tc.want {
				t.Errorf("tenant slice %v, want %v", info.Slice, tc.want)
			}
		})
	}
}

func TestConfiguredSliceOverridesProfileDefault(t *testing.T) {
	s, _ := New(Config{Slice: 7 * time.Millisecond})
	id, _ := s.AddTenant(24)
	if info, _ := s.Tenant(id); info.Slice != 7*time.Millisecond {
		t.Fatalf("slice %v, want the configured 7ms", info.Slice)
	}
}

func TestConfigDefaultsFilledInOnePlace(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Policy: BestEffort, AveragingFactor: 33, MaxTenants: DefaultMaxTenants, MaxQueue: DefaultMaxQueue}
	if got := s.Config(); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
}

func TestConfigRangesRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"unknown policy", Config{Policy: 3}},
		{"slice below 1 ms", Config{Slice: time.Millisecond - 1}},
		{"slice above 30 ms", Config{Slice: 30*time.Millisecond + 1}},
		{"negative slice", Config{Slice: -time.Millisecond}},
		{"averaging factor above 60", Config{AveragingFactor: 61}},
		{"negative averaging factor", Config{AveragingFactor: -1}},
		{"max tenants above limit", Config{MaxTenants: MaxTenantsLimit + 1}},
		{"max queue above limit", Config{MaxQueue: MaxQueueLimit + 1}},
		{"negative start", Config{Start: -1}},
		{"start past MaxTime", Config{Start: MaxTime + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New(%+v) = %v, want ErrInvalidConfig", tc.cfg, err)
			}
		})
	}
	for _, ok := range []Config{
		{Slice: MinSlice}, {Slice: MaxSlice}, {AveragingFactor: 1}, {AveragingFactor: 60},
		{MaxTenants: MaxTenantsLimit}, {MaxQueue: MaxQueueLimit}, {Start: MaxTime},
	} {
		if _, err := New(ok); err != nil {
			t.Errorf("New(%+v): %v, want the limit accepted", ok, err)
		}
	}
}

// String reads like the driver's log line: policy, order, slice in ms.
func TestConfigStringLikeDriverLog(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "vGPU scheduler: Best Effort, strict round-robin, averaging factor 33, time slice profile default (2 ms up to 8 vGPUs per GPU, 1 ms above)"},
		{Config{Policy: EqualShare, Slice: 2 * time.Millisecond}, "vGPU scheduler: Equal Share, strict round-robin, averaging factor 33, time slice 2 ms"},
		{Config{Policy: FixedShare, Slice: time.Second / 960, AveragingFactor: 60}, "vGPU scheduler: Fixed Share, strict round-robin, averaging factor 60, time slice 1.042 ms"},
		{Config{Policy: EqualShare, Slice: 30 * time.Millisecond, DisableStrictRoundRobin: true}, "vGPU scheduler: Equal Share, least-scheduled first, time slice 30 ms"},
	} {
		if got := tc.cfg.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
