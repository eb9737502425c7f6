package live

import (
	"context"
	"errors"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestSendRefusesPostCopy: post-copy is the simulated mode's alone for
// now; a live send asked for it is refused before it touches anything.
func TestSendRefusesPostCopy(t *testing.T) {
	for _, p := range []migrate.Policy{
		{Mode: migrate.PostCopy},
		{Mode: migrate.PreCopy, OnNonConvergence: migrate.SwitchToPostCopy},
	} {
		if _, err := (SendConfig{Policy: p}).withDefaults(); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("%v, %v: %v", p.Mode, p.OnNonConvergence, err)
		}
	}
}

// TestSendRefusesRemoteGPU: a VM whose GPU is a session of another host
// stays where it is, whole and running, and the destination holds
// nothing: the live mode cannot name the session to another process.
func TestSendRefusesRemoteGPU(t *testing.T) {
	server, err := vgpu.NewHost(vgpu.HostConfig{Name: "server"})
	must(t, err)
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "src"})
	must(t, err)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst"})
	must(t, err)
	r, err := server.OpenRemote(vgpu.RemoteConfig{Profile: "P40-12Q", Link: vgpu.RemoteRoCE()})
	must(t, err)
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 256 * vgpu.MiB, Remote: []*vgpu.RemoteGPU{r}})
	must(t, err)
	must(t, vm.Start())
	s, d := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(s), rws(d), SendConfig{}, ReceiveConfig{})
	if !errors.Is(res.srcErr, migrate.ErrConfig) {
		t.Fatalf("Send: %v", res.srcErr)
	}
	if vm.State() != vgpu.VMRunning || vm.Migrating() || r.Client() != vm {
		t.Errorf("the VM is %v, migrating %v, its session's client %v", vm.State(), vm.Migrating(), r.Client())
	}
	holdsNothing(t, dst)
}
