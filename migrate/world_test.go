package migrate

import "github.com/vgpusim/vgpusim/migrate/internal/migtest"

// The worlds these tests migrate are built by package migtest, which
// package live's tests share, so that a live result compares with a
// simulated one built alike. These names keep the tests short.
type (
	tb              = migtest.TB
	counterWorkload = migtest.Counter
	sourceImage     = migtest.SourceImage
)

const (
	MiB           = migtest.MiB
	GiB           = migtest.GiB
	isolationVMID = migtest.IsolationVMID
)

var (
	must                 = migtest.Must
	hostPair             = migtest.HostPair
	tinyModel            = migtest.TinyModel()
	inferenceVM          = migtest.InferenceVM
	imageOf              = migtest.ImageOf
	checkNothingAt       = migtest.CheckNothingAt
	secretPages          = migtest.SecretPages
	writeSecret          = migtest.WriteSecret
	secretPagesIn        = migtest.SecretPagesIn
	windowOf             = migtest.WindowOf
	nextTenantReadsZeros = migtest.NextTenantReadsZeros
	readsZeros           = migtest.ReadsZeros
	smallPageHosts       = migtest.SmallPageHosts
	counterVM            = migtest.CounterVM
	checkOneOwner        = migtest.CheckOneOwner
	checkSettled         = migtest.CheckSettled
	sameClock            = migtest.SameClock
)
