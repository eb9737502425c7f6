package script

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
)

// execAll runs a script's commands in a new world and returns their
// outputs, failing on a script error.
func execAll(t *testing.T, text string) []string {
	t.Helper()
	s, err := parse("x", text)
	if err != nil {
		t.Fatal(err)
	}
	w, outs := newWorld(), []string(nil)
	for _, c := range s.cases {
		out, err := w.exec(c.cmd, c.args)
		if err != nil {
			t.Fatalf("line %d: %s: %v", c.line, c.text, err)
		}
		outs = append(outs, out)
	}
	return outs
}

// TestHostile: odd commands, at odd moments, give an output or a script
// error, never a panic.
func TestHostile(t *testing.T) {
	setup := `host name=h1 ram=8GiB
host name=h2 ram=8GiB memory=sparse
vm id=a host=h1 profile=P40-2Q ram=64MiB footprint=8MiB
workload vm=a kind=desktop footprint=32MiB ram-working-set=8MiB updates=2
link name=thin from=1g capacity=50Mbit
migrate vm=a to=h2 link=thin
`
	odd := []string{
		"host name=h3 gpus=16 gpu=A100", "host name=h4 gpu=P100", "host name=h5 fb-page=3", "host name=h6 ram-page=0",
		"host name=h7 ram=0", "host name=h8 memory=dense", "host name=h9 seed=0xffffffffffffffff", "host name=h1",
		"vm id=b host=h1 profile=P40-2Q ram=1B", "vm id=c host=h1 profiles=(P40-2Q, P40-2Q)", "vm id=d host=h1",
		"vm id=e host=h2 profile=A100-4C", "vm id=f host=h1 profile=P40-2Q ram=8GiB", "vm id=a host=h2 profile=P40-1Q",
		"vm id=g host=h1 profile=() ram=4KiB", "vm id=h host=h1 passthrough profile=P40-2Q",
		"workload vm=a kind=inference", "workload vm=ghost kind=cad", "workload vm=a kind=none",
		"workload vm=a kind=training footprint=usable",
		"migrate vm=a to=h2", "migrate vm=a to=h1", "migrate vm=a to=h2 label=m1", "migrate vm=a to=h2 via=(nowhere)",
		"migrate vm=a to=h2 link=thin batch=1 max-rounds=0 stun-target=0s codec=auto encode-workers=1024",
		"migrate vm=a to=h2 preset=vsphere-9", "link name=zero from=10g capacity=0", "link name=thin",
		"link name=eff from=10g efficiency=1", "capacity link=thin rate=1", "capacity link=nowhere rate=1Gbit",
		"capacity link=thin rate=1e15", "rates link=nowhere", "rates link=thin",
		"inject fault=link-stall link=thin", "inject fault=link-stall link=thin", "inject fault=refused link=thin",
		"inject fault=link-down link=nowhere", "inject fault=refused migration=nope",
		"step migration=m1 n=3", "step n=1", "cancel migration=m1", "cancel migration=m1",
		"inject fault=destination-gone migration=m1", "report migration=m1 rounds metrics published=1ns",
		"step migration=m1 until=done", "step migration=m1 until=release round=3",
		"pause vm=a", "pause vm=a", "resume vm=a", "resume vm=ghost",
		"migrate vm=a to=h2 link=thin label=again", "step migration=again until=release quiet",
		"inject fault=link-down migration=again", "cancel migration=again", "inject fault=link-down link=thin",
		"run migration=again events", "state",
		"advance by=0s", "advance to=0s", "advance by=1ms events", "step n=5", "run", "run migration=m1 events",
		"state", "hosts", "check", "sim max-per-host=1", "reset", "state", "hosts", "check", "run", "step",
		"advance by=1s", "rates link=10g", "report migration=m1", "sim max-per-host=1", "host name=x",
	}
	text := strings.ReplaceAll(setup, "\n", "\n----\n\n") + strings.Join(odd, "\n----\n\n") + "\n----\n"
	s, err := parse("x", text)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	for _, c := range s.cases {
		out, err := w.exec(c.cmd, c.args)
		if err != nil && strings.Contains(err.Error(), "panic") {
			t.Errorf("%s: %v", c.text, err)
		}
		if err == nil && out == "" {
			t.Errorf("%s: no output", c.text)
		}
	}
}

// TestDeterministic: a script's outputs are the same run after run.
func TestDeterministic(t *testing.T) {
	text, err := os.ReadFile("testdata/scripts/basic.txt")
	if err != nil {
		t.Fatal(err)
	}
	a, b := execAll(t, string(text)), execAll(t, string(text))
	if strings.Join(a, "") != strings.Join(b, "") {
		t.Fatalf("two runs differ:\n%s\n---\n%s", strings.Join(a, ""), strings.Join(b, ""))
	}
}

// TestNamed: a script names migrate's values as their String prints them,
// a hyphen for each space, or by the language's aliases; nothing else.
func TestNamed(t *testing.T) {
	mode := named(migrate.ParseMode, modeAliases)
	nc := named(migrate.ParseNonConvergence, nonConvergenceAliases)
	phase := named(migrate.ParsePhase, nil)
	for _, c := range []struct {
		got  func() (any, error)
		want any
	}{
		{func() (any, error) { return mode("pre-copy") }, migrate.PreCopy},
		{func() (any, error) { return mode("precopy") }, migrate.PreCopy},
		{func() (any, error) { return mode("legacy") }, migrate.Legacy},
		{func() (any, error) { return nc("switch") }, migrate.SwitchAnyway},
		{func() (any, error) { return nc("switch-over-anyway") }, migrate.SwitchAnyway},
		{func() (any, error) { return nc("abort") }, migrate.Abort},
		{func() (any, error) { return phase("pre-copy") }, migrate.PhasePreCopy},
		{func() (any, error) { return phase("final-RAM") }, migrate.PhaseFinalRAM},
		{func() (any, error) { return phase("final-framebuffer") }, migrate.PhaseFinalFramebuffer},
	} {
		if got, err := c.got(); err != nil || got != c.want {
			t.Errorf("got %v, %v; want %v", got, err, c.want)
		}
	}
	for _, bad := range []string{"", "Legacy", "pre copy", "precopy-"} {
		if _, err := mode(bad); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("mode %q: %v, want an error wrapping migrate.ErrConfig", bad, err)
		}
	}
	for _, bad := range []string{"final-ram", "switch", "setup-"} {
		if _, err := phase(bad); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("phase %q: %v, want an error wrapping migrate.ErrConfig", bad, err)
		}
	}
}
