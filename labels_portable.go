package weft

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// On the portable backend a body runs on a goroutine of its own, whose g
// holds the labels the profilers read while the body runs. The runtime's
// coroutine switch carries no labels, so the engine carries them.
//
// A record that carries its body's labels (labels.go) gives them to the
// body goroutine as it starts, which keeps them from then on.
//
// A record that leaves labels to its executor has its body run under the
// labels of the goroutine that calls Run, as on the stack-copying
// backend, where both are one goroutine. So at each resume Run's
// goroutine hands its labels to the body goroutine, and at each switch out
// (a yield, or the body's return) the body goroutine hands its own back.
// The scheduler relies on this: it gives a virtual thread its labels, and
// those naming its mount, before each Run, and keeps what it finds after.

// leavesLabels reports whether c leaves labels to its executor: c is
// uncounted, or marked by LeaveLabels.
func (c *Cont) leavesLabels() bool {
	return !c.counted || (*countedCont)(unsafe.Pointer(c)).leaveLabels
}

// startLabels gives the body goroutine its labels as it starts. They
// replace those it inherited from the goroutine that first ran c: the
// body's own, which the record then drops, or, for a record that leaves
// labels, those of Run's goroutine (sendLabels).
func (c *Cont) startLabels() {
	if c.leavesLabels() {
		c.pt.receiveLabels()
		return
	}
	cc := (*countedCont)(unsafe.Pointer(c))
	if l := cc.labels; l != proflabel.Get() {
		proflabel.Set(l)
	}
	if cc.labels != nil {
		cc.labels = nil
	}
}

// sendLabels records the calling goroutine's labels for the other side of
// the switch it is about to make (receiveLabels). Only for a record that
// leaves labels to its executor.
func (p *portableState) sendLabels() { p.labels = proflabel.Get() }

// receiveLabels gives the calling goroutine the labels the other side of
// the switch just made recorded (sendLabels).
func (p *portableState) receiveLabels() {
	if l := p.labels; l != proflabel.Get() {
		proflabel.Set(l)
	}
}
