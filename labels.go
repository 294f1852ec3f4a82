package weft

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// A continuation's body has pprof labels of its own, as a goroutine has.
// It starts with the labels of the goroutine that created its record
// (NewCont, or Reset for a new body), as a go statement's goroutine does.
// Labels it sets (pprof.Do, pprof.SetGoroutineLabels) stay with it across
// yields, whoever resumes it. The goroutine that called Run has its own
// back when Run returns, however it returns.
//
// The record keeps the body's labels (countedCont.labels). The portable
// backend hands them to the body goroutine as it starts
// (labels_portable.go). The stack-copying backend puts them on the
// goroutine at each mount and takes them back at each unmount
// (labels_stackcopy_amd64.go).
//
// Only counted records (NewCont) carry labels, in the counters'
// allocation. Uncounted ones, and those marked LeaveLabels, leave labels
// to their executor: their bodies run under the labels of the goroutine
// that calls Run, and leave the labels they set there, on both backends.
// The scheduler gives each virtual thread its own.

// createLabels gives the new body of a reset record, a counted one, the
// calling goroutine's labels, unless c leaves labels to its executor.
func (c *Cont) createLabels() {
	if cc := (*countedCont)(unsafe.Pointer(c)); !cc.leaveLabels {
		if l := proflabel.Get(); l != nil {
			cc.labels = l
		}
	}
}
