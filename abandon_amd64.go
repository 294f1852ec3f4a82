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

// abandonFrozen readies c, which Abandon has moved to cancelling, for
// mount: its Yield is to unwind (stackState.cancel), and mount is to
// finish it (stackRare.abandoned).
func (c *Cont) abandonFrozen() {
	c.stack.cancel = true
	c.stack.rareState().abandoned = true
}
