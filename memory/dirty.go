package memory

// CollectDirty moves the pages written since the last collect into dst and
// clears them from r's dirty log, returning how many there were. dst is
// resized to r's page count, allocating only when it is too small, so a
// reused set makes collecting allocation-free.
//
// Collecting is safe while other goroutines write: a write that races a
// collect is reported by that collect or by the next, never lost, because
// writers store their bytes before they set the page's bit and the collect
// takes a bit out of the log before its caller reads the page. A collect
// holds every page lock of the root for an instant, so it waits for
// accesses in progress and delays others by about as long as it takes to
// take 256 uncontended locks.
//
// A nil dst collects nothing: the log is left as it is and CollectDirty
// returns 0.
func (r *Region) CollectDirty(dst *PageSet) int {
	if dst == nil {
		return 0
	}
	return r.log.collect(dst)
}

// DirtyCount returns the number of pages written since the last collect,
// without clearing them.
func (r *Region) DirtyCount() int { return r.log.count() }

// StartDirtyLog clears r's dirty log and turns logging on. A new Region
// logs from the start unless made with Config.DirtyLogOff; a new window
// does.
func (r *Region) StartDirtyLog() { r.log.start() }

// StopDirtyLog turns logging off and clears the log: writes then mark
// nothing until StartDirtyLog. A log that is off holds no memory, where
// one that is on holds a bit or two for every page of r.
func (r *Region) StopDirtyLog() { r.log.stop() }

// DirtyLogging reports whether r's dirty log is on.
func (r *Region) DirtyLogging() bool { return r.log.on.Load() }

// DirtyClasses counts the pages written since the last collect by the
// class each holds now, without clearing the log: counts[c] gains the
// pages of each generated class c, counts[ClassExplicit] those whose bytes
// were written explicitly. It returns how many pages it counted (zero with
// the log off). A migration asks it when a pre-copy round arrives, to
// predict what the pages left dirty will take on the wire from what they
// hold rather than from what was sent before. It fails only for a window
// that was unmapped.
func (r *Region) DirtyClasses(counts *[ClassExplicit + 1]int64) (int, error) {
	if counts == nil {
		return 0, configError("dirty classes into a nil count")
	}
	if r.unmapped.Load() {
		return 0, ErrUnmapped
	}
	sp := r.sp
	return r.log.each(func(p int) {
		l := sp.lock(r.first + p)
		l.RLock()
		c, _ := sp.state(r.first + p)
		l.RUnlock()
		counts[min(c, ClassExplicit)]++
	}), nil
}
