//go:build amd64 && !race && !msan && !asan

package weft

import (
	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/pinning"
)

// This file is the stack-copying freeze driver: capture a continuation's
// region (capture_amd64.go), then jump back to its arch.Enter, or report
// why nothing was suspended. The resume "returns" from the capture again.

// stackYield suspends the running stackState: it captures the frames from its own
// up to arch.Enter's and jumps back. When the continuation is thawed, the
// capture call "returns" again, with c.resumed set, and stackYield returns.
// It returns false, suspending nothing, if the region cannot be captured.
//
//go:noinline
func stackYield(c *stackState) bool {
	err := c.chunk.capture(enterPC, false, hooks.yieldCounts)
	if c.resumed {
		c.resumed = false
		return true
	}
	if err != nil {
		c.rareState().err = err
		return false
	}
	c.yielded, c.elided = true, false
	arch.JumpBack(c.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// settle finishes a capture that its caller made of its own frame (the
// capture call is settle's argument). Right after the capture it jumps
// back, the region being frozen, or reports why nothing was suspended.
// When the region is thawed and the capture call "returns" again, it
// reports why the continuation was resumed: cancelled if it was abandoned
// and must unwind, pe if the freeze of an enclosing continuation failed.
func (s *stackState) settle(err error) (cancelled bool, pe *errPinned) {
	if s.resumed {
		s.resumed = false
		if s.rare != nil && s.rare.pinErr != nil {
			return false, s.takePinErr()
		}
		return s.cancel, nil
	}
	if err != nil {
		return false, refused(err)
	}
	s.yielded, s.elided = true, false
	arch.JumpBack(s.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// leave finishes a capture that weft.Yield made from its caller's frame
// (the capture call is leave's argument): it jumps back, the region being
// frozen, or reports why nothing was suspended. The capture call never
// "returns" again: the resume continues the caller of Yield through
// yieldReturn.
func (s *stackState) leave(err error) *errPinned {
	if err != nil {
		return refused(err)
	}
	s.yielded, s.elided = true, true
	arch.JumpBack(s.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// countYields counts, once the whole freeze has succeeded, a yield of c
// and of every continuation suspended inside it. (Each capture counted
// what it froze as it froze it: a freeze that fails in an enclosing
// continuation after the inner ones were captured still copied their
// frames, and thaws them back.)
func (c *Cont) countYields() {
	for x := c; x != nil; x = x.child {
		if n := x.counters(); n != nil {
			bump(&n.yields, 1)
		}
	}
}

// freezeNested freezes c, from its caller's frame up to c's return barrier or
// entry trampoline, as part of a yield to t that an inner continuation
// made, and returns when c is thawed: cancelled if c was abandoned
// meanwhile and must unwind. If c cannot be frozen, it returns at once
// with the reason, and nothing is suspended. weft.Yield freezes the
// continuation it suspends first from its own caller's frame instead
// (stackState.leave).
//
//go:noinline
func (c *Cont) freezeNested(t *Cont) (cancelled bool, pe *errPinned) {
	c.target = t
	return c.stack.settle(c.stack.chunk.capture(enterPC, false, c.counters()))
}

// enterPC is the entry PC of arch.Enter, the boundary of every region.
var enterPC = arch.EnterPC()

// refused returns why a capture refused to suspend, err, as a pinning.
//
//go:noinline
func refused(err error) *errPinned {
	if e, ok := err.(*errPinned); ok {
		return e
	}
	// capture refused for a reason that is not about one frame (the
	// engine's own frames are not what it expects): nothing was
	// suspended, so the yield is pinned rather than lost.
	return &errPinned{pinning.UnknownFrame, 0}
}

//go:noinline
func (s *stackState) takePinErr() *errPinned {
	pe := s.rare.pinErr
	s.rare.pinErr = nil
	return pe
}

// pinnedFrom converts a failed capture into the error Yield returns.
func (t *Cont) pinnedFrom(pe *errPinned) *pinning.Error {
	return t.pinnedYield(pe.reason, pe.pc)
}
