package vgpusimtest

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Oracle records what the memory of the VMs it follows must hold, and
// compares any host's copy of a VM with it. It learns what a page must
// hold from the writes it makes itself: those of its workloads (Workload),
// which rewrite pages of their own at a steady rate while the VM runs, and
// the caller's own writes (WriteAt). Pages neither wrote are not checked:
// generated content and other workloads' data are the library's to
// reproduce, and the oracle knows nothing of them.
//
// Because a workload moves with its VM (vgpu.VM.HandOverWorkload), the
// oracle keeps following a VM across migrations: after any step, the
// copy of the VM that runs its workload must hold every page the oracle
// recorded. That is the invariant "nothing is lost", by content, and it
// holds at any time, not only at the stun.
//
// An Oracle is safe for concurrent use: a Sim with several HostWorkers
// runs the workloads of different hosts at once.
type Oracle struct {
	mu  sync.Mutex
	vms map[string]*oracleVM
}

// oracleVM is what one VM's pages must hold, by region (0 guest RAM, 1+i
// framebuffer i) and page.
type oracleVM struct {
	pages map[oraclePage]*pageExpect
}

type oraclePage struct{ region, page int }

// pageExpect is a page's expected content: generated from a version when
// data is nil (a workload's write), else data itself (the caller's).
type pageExpect struct {
	version uint64
	key     uint64
	data    []byte
}

// NewOracle returns an oracle that follows no VM yet.
func NewOracle() *Oracle { return &Oracle{vms: map[string]*oracleVM{}} }

func (o *Oracle) vm(id string) *oracleVM {
	v := o.vms[id]
	if v == nil {
		v = &oracleVM{pages: map[oraclePage]*pageExpect{}}
		o.vms[id] = v
	}
	return v
}

// Forget drops the oracle's record of VM id, as when the VM is destroyed
// and its ID may be used again.
func (o *Oracle) Forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.vms, id)
}

// VMs returns the IDs of the VMs the oracle follows, sorted.
func (o *Oracle) VMs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]string, 0, len(o.vms))
	for id := range o.vms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Pages returns how many pages of VM id the oracle checks.
func (o *Oracle) Pages(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if v := o.vms[id]; v != nil {
		return len(v.pages)
	}
	return 0
}

// Region returns region i of vm: 0 is guest RAM, 1+j framebuffer j.
func Region(vm *vgpu.VM, i int) (*memory.Region, error) {
	if i == 0 {
		return vm.RAM(), nil
	}
	fbs := vm.Framebuffers()
	if i < 0 || i > len(fbs) {
		return nil, fmt.Errorf("%w: region %d of VM %q, which has %d", ErrOutOfRange, i, vm.ID(), len(fbs)+1)
	}
	return fbs[i-1], nil
}

// WriteAt writes p at off of region i of vm (0 guest RAM, 1+j framebuffer
// j) and records what the pages it touches must hold now: the oracle's
// record of the page if it has one, else the page as vm holds it before
// the write, with p over it. Write pages no workload of the VM writes,
// or the record goes stale.
func (o *Oracle) WriteAt(vm *vgpu.VM, region int, off int64, p []byte) error {
	r, err := Region(vm, region)
	if err != nil {
		return err
	}
	if off < 0 || off+int64(len(p)) > r.Size() {
		return fmt.Errorf("%w: %d bytes at %d of a %d-byte region", ErrOutOfRange, len(p), off, r.Size())
	}
	ps := int64(r.PageSize())
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.vm(vm.ID())
	// The expected pages are built before the write, from the oracle's
	// record or, for a page it never saw, from the copy as it is.
	type staged struct {
		k    oraclePage
		data []byte
	}
	var stage []staged
	for first := off / ps; first*ps < off+int64(len(p)); first++ {
		k := oraclePage{region, int(first)}
		data := make([]byte, ps)
		if e := v.pages[k]; e != nil {
			e.fill(data)
		} else if _, err := r.ReadAt(data, first*ps); err != nil {
			return err
		}
		lo := max(off, first*ps)
		hi := min(off+int64(len(p)), (first+1)*ps)
		copy(data[lo-first*ps:hi-first*ps], p[lo-off:hi-off])
		stage = append(stage, staged{k, data})
	}
	if _, err := r.WriteAt(p, off); err != nil {
		return err
	}
	for _, s := range stage {
		v.pages[s.k] = &pageExpect{data: s.data}
	}
	return nil
}

// record notes a workload's write of version of a page.
func (o *Oracle) record(id string, k oraclePage, key, version uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.vm(id).pages[k] = &pageExpect{version: version, key: key}
}

// fill writes the expected content into dst, a page.
func (e *pageExpect) fill(dst []byte) {
	if e.data != nil {
		copy(dst, e.data)
		return
	}
	versionPage(dst, e.key, e.version)
}

// versionPage is the content of a page a workload wrote: the version, the
// page's key, and a word derived from both repeated to the end, so that
// every byte of the page depends on the write.
func versionPage(dst []byte, key, version uint64) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], key)
	binary.LittleEndian.PutUint64(b[8:], version)
	w := xxhash.Sum64(b[:])
	for i := 0; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], w+uint64(i))
	}
	if len(dst) >= 16 {
		copy(dst, b[:])
	}
}

// Check compares vm's memory with the oracle's record of VM vm.ID(): every
// page the oracle recorded must hold what it recorded. A page absent (a
// post-copy's, still on its way: memory.Region.Absent) is skipped: the
// source holds it, and reading it would fault and fetch it, which would
// change the run the check looks at; it is checked once it landed. The
// error is a *MemoryError naming the first page that differs, in region
// and page order.
func (o *Oracle) Check(vm *vgpu.VM) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.vms[vm.ID()]
	if v == nil {
		return nil
	}
	keys := make([]oraclePage, 0, len(v.pages))
	for k := range v.pages {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b oraclePage) int {
		if a.region != b.region {
			return a.region - b.region
		}
		return a.page - b.page
	})
	var want, got []byte
	for _, k := range keys {
		r, err := Region(vm, k.region)
		if err != nil {
			return &MemoryError{VM: vm.ID(), Host: vm.Host().Name(), Region: k.region, Page: k.page, Err: err}
		}
		if r.Absent(k.page) {
			continue
		}
		ps := r.PageSize()
		if len(want) != ps {
			want, got = make([]byte, ps), make([]byte, ps)
		}
		v.pages[k].fill(want)
		if _, err := r.ReadAt(got, int64(k.page)*int64(ps)); err != nil {
			return &MemoryError{VM: vm.ID(), Host: vm.Host().Name(), Region: k.region, Page: k.page, Err: err}
		}
		for i := range want {
			if want[i] != got[i] {
				return &MemoryError{VM: vm.ID(), Host: vm.Host().Name(), Region: k.region, Page: k.page, Offset: i}
			}
		}
	}
	return nil
}
