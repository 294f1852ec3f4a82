package weft

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// A continuation's body has pprof labels of its own, as a goroutine has:
// it starts with those of the goroutine that created its record (NewCont,
// or Reset for a new body), as a go statement's goroutine and iter.Pull's
// body start with their creator's; labels it sets (pprof.Do,
// pprof.SetGoroutineLabels) stay with it across yields, whoever resumes
// it; and the goroutine that called Run has its own back when Run
// returns, by a yield, a return, a panic or runtime.Goexit. The record
// keeps them (countedCont.labels) from its creation, and each backend
// hands them to the body: the portable one as the body goroutine starts
// (its goroutine keeps them from then on), the stack-copying one at each
// mount and unmount (labels_stackcopy_amd64.go), the body running on the
// goroutine that called Run. Without this, on the stack-copying backend a
// body that set labels and yielded left them on its caller, a body resumed
// elsewhere ran under that goroutine's, and a pprof.Do around a yield put
// the first goroutine's labels on the second when it returned; and a
// body's first labels were those of its first Run's caller on both.
//
// Only counted records (NewCont) carry labels, in the counters'
// allocation. Uncounted ones, and those marked LeaveLabels, leave labels
// to their executor: the scheduler gives each virtual thread its own.

// createLabels gives the new body of a reset record, a counted one, the
// calling goroutine's labels, unless c leaves labels to its executor.
func (c *Cont) createLabels() {
	if cc := (*countedCont)(unsafe.Pointer(c)); !cc.leaveLabels {
		if l := proflabel.Get(); l != nil {
			cc.labels = l
		}
	}
}

// startLabels gives the portable backend's body goroutine, as it starts,
// the labels c's record keeps for its body, in place of those it
// inherited from the goroutine that first ran c; its goroutine keeps them
// from then on, and the record drops them.
func (c *Cont) startLabels() {
	if !c.counted {
		return
	}
	cc := (*countedCont)(unsafe.Pointer(c))
	if cc.leaveLabels {
		return
	}
	if l := cc.labels; l != proflabel.Get() {
		proflabel.Set(l)
	}
	if cc.labels != nil {
		cc.labels = nil
	}
}
