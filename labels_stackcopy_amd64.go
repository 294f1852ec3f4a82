//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// A body runs on the goroutine that calls Run, and that goroutine's g
// holds the labels the profilers read. So a record that carries its body's
// labels (labels.go) puts them in that g at each mount. The unmount takes
// them back.

// mountLabels puts the labels of c's body on the calling goroutine as c
// is mounted. It keeps outer, the goroutine's own, for unmount to put
// back. c is a counted record; one that leaves labels to its executor is
// left alone. mount skips the call when outer is both the body's labels
// and the ones kept (none, when no labels are in use).
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

// unmountLabels is unmount's part for a counted record. The goroutine's
// labels, now, differ from those mountLabels found or from the body's.
// now are kept as the body's, and the goroutine gets its own back.
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
