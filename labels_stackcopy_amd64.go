//go:build amd64 && !race && !msan && !asan

package weft

import "unsafe"

// On this backend a continuation's body runs on the goroutine that calls
// Run, whose g holds the pprof labels the CPU profiler's signal handler
// and the goroutine profile read. A record from NewCont that does not
// leave labels to its executor (LeaveLabels) has its body's put in that g
// at each mount and taken back at the unmount, so that the body has labels of its own, as on the portable
// backend, where it runs on a goroutine of its own: it starts with those
// of the goroutine that first runs it (that goroutine's, which iter.Pull's
// goroutine inherits), labels it sets (pprof.Do, pprof.SetGoroutineLabels)
// stay with it across yields, whoever resumes it, and the goroutine that
// called Run has its own back when Run returns, by a yield, a return, a
// panic or runtime.Goexit. Without this a body that set labels and
// yielded left them on its caller, and one resumed elsewhere ran under
// that goroutine's; a pprof.Do around a yield put the first goroutine's
// labels on the second when it returned.

// profLabel returns the calling goroutine's profiler labels (the runtime's
// g.labels, as runtime/pprof reads them).
//
//go:linkname profLabel runtime/pprof.runtime_getProfLabel
func profLabel() unsafe.Pointer

// setProfLabel sets the calling goroutine's profiler labels.
//
//go:linkname setProfLabel runtime/pprof.runtime_setProfLabel
func setProfLabel(labels unsafe.Pointer)

// mountLabels puts the labels of c's body, a counted record, on the
// calling goroutine as c is mounted, and keeps outer, the goroutine's own,
// for scUnmount to put back: at the first mount the body takes the
// goroutine's. A record that leaves labels to its executor keeps only the
// goroutine's, which scUnmount then finds in place. Its callers check
// c.counted first (an uncounted record, a virtual thread's, pays a test),
// and scMount calls it only if outer is not already both the body's
// labels and the ones kept (none, say, when no labels are in use).
//
//go:noinline
func (c *Cont) mountLabels(outer unsafe.Pointer) {
	cc := (*countedCont)(unsafe.Pointer(c))
	if cc.outer != outer {
		cc.outer = outer
	}
	if cc.labels == outer || cc.leaveLabels {
		return
	}
	if !c.sc.started {
		cc.labels = outer
		return
	}
	setProfLabel(cc.labels)
}

// unmountLabels is scUnmount's part for a counted record whose goroutine
// has labels, now, other than those mountLabels found on it or other than
// the body's: now are kept as the body's, and the goroutine has its own
// back.
//
//go:noinline
func (c *Cont) unmountLabels(now unsafe.Pointer) {
	cc := (*countedCont)(unsafe.Pointer(c))
	if cc.leaveLabels {
		cc.outer = nil
		return
	}
	if now != cc.labels {
		cc.labels = now
	}
	if outer := cc.outer; now != outer {
		setProfLabel(outer)
		cc.outer = nil // the goroutine's; not the record's to keep alive
	}
}
