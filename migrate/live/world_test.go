package live

import (
	"testing"

	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The worlds these tests migrate are built by package migtest, which
// package migrate's tests share, so that a live result compares with a
// simulated one built alike. These names keep the tests short.
type (
	counterWorkload = migtest.Counter
	sourceImage     = migtest.SourceImage
	windowAt        = migtest.WindowAt
)

const (
	MiB           = migtest.MiB
	GiB           = migtest.GiB
	isolationVMID = migtest.IsolationVMID
)

var (
	must                 = migtest.Must
	hostPair             = migtest.HostPairApart
	tinyModel            = migtest.TinyModel()
	inferenceVM          = migtest.InferenceVM
	checkNothingAt       = migtest.CheckNothingAt
	writeSecret          = migtest.WriteSecret
	secretPagesIn        = migtest.SecretPagesIn
	nextTenantReadsZeros = migtest.NextTenantReadsZeros
	checkOneOwner        = migtest.CheckOneOwner
	checkSettled         = migtest.CheckSettled
	regionDigests        = migtest.RegionDigests
)

// faultWorld is a source running the counter oracle, a destination and a
// third host: the simulated fault table's world.
type faultWorld struct {
	src, dst, third *vgpu.Host
	vm              *vgpu.VM
	w               *counterWorkload
}

func newFaultWorld(t testing.TB, paused bool) *faultWorld {
	t.Helper()
	o := migtest.NewOracleWorld(t, paused)
	return &faultWorld{src: o.Src, dst: o.Dst, third: o.Third, vm: o.VM, w: o.W}
}
