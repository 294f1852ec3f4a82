//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
)

// This file is abandonment and StackTrace on the stack-copying backend.

// traceFrozen returns the frozen frames of c and of the continuations
// suspended inside it, innermost first, as StackTrace reports them.
func (c *Cont) traceFrozen() []runtime.Frame {
	var frames []runtime.Frame
	if ch := c.child; ch != nil {
		frames = ch.traceFrozen()
	}
	k := &c.stack.chunk
	pcs := make([]uintptr, 0, k.frozenFrames())
	for _, f := range k.frames() {
		pcs = f.d.fn.LogicalPCs(f.pc, pcs) // one PC per logical frame
	}
	return append(frames, userFrames(pcs)...)
}

// frozenDefers reports whether a frame frozen in c, or in a continuation
// suspended inside it, may have deferred calls pending. c's chunk alone
// tells. A continuation suspended inside c was mounted by a Run whose
// mount frame, frozen in c, has a deferred call pending (mount's handler
// of an abnormal end). TestAbandonableNested fails if that changes.
func (c *Cont) frozenDefers() bool { return c.stack.chunk.deferred }

// abandonFrozen unwinds c, which Abandon has moved to cancelling, on a
// fresh goroutine. Its Yield unwinds (stackState.cancel), and mount
// finishes it (stackRare.abandoned).
func (c *Cont) abandonFrozen() {
	c.stack.cancel = true
	c.stack.rareState().abandoned = true
	go c.mount(abandoning{})
}

// abandoning is the owner with which abandonFrozen calls mount: it tells
// an abandonment from a Run without a test on Run's path.
type abandoning struct{}
