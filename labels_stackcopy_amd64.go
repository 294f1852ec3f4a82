//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// On this backend a continuation's body runs on the goroutine that calls
// Run, whose g holds the pprof labels the CPU profiler's signal handler
// and the goroutine profile read: a record that carries its body's labels
// (labels.go) has them put in that g at each mount and taken back at the
// unmount.

// mountLabels puts the labels of c's body, a counted record, on the
// calling goroutine as c is mounted, and keeps outer, the goroutine's own,
// for unmount to put back. A record that leaves labels to its executor
// does neither. Its callers check c.counted first (an uncounted record, a
// virtual thread's, pays a test), and mount calls it only if outer is
// not already both the body's labels and the ones kept (none, say, when
// no labels are in use).
//
//go:noinline
func (c *Cont) mountLabels(outer unsafe.Pointer) {
	cc := (*countedCont)(unsafe.Pointer(c))
	if cc.leaveLabels {
		return
	}
	if cc.outer != outer {
		cc.outer = outer
	}
	if cc.labels != outer {
		proflabel.Set(cc.labels)
	}
}

// unmountLabels is unmount's part for a counted record whose goroutine
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
		proflabel.Set(outer)
		cc.outer = nil // the goroutine's; not the record's to keep alive
	}
}
