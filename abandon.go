package weft

import (
	"runtime"
	"strings"
)

// This file ends dropped continuations (Abandon) and reports suspended
// ones' frames (StackTrace), on both backends.

// Abandon ends a suspended continuation that nobody can resume any more.
// Its body unwinds as if by runtime.Goexit, running its deferred calls, on
// an internal goroutine, which then exits. On the portable backend that is
// its body goroutine. On the stack-copying backend it is a fresh goroutine
// the frozen frames are thawed onto. Package continuation calls Abandon
// from a cleanup when the handle of a suspended continuation becomes
// unreachable. It does nothing unless c is suspended.
func (c *Cont) Abandon() {
	if c.state.CompareAndSwap(int32(stSuspended), int32(stCancelling)) {
		if useStackCopy {
			c.abandonFrozen()
			return
		}
		go func() {
			defer c.finish()
			// A body that ends locked leaves the lock to this
			// goroutine (takeLocks), which ends with it.
			defer c.pt.takeLocks()
			// No Run mounts it: its body unwinds inside nothing, as
			// on the stack-copying backend's fresh goroutine. Left
			// unresolved, its parent would be read from the goroutine
			// that last ran it (Cont.parent), and the deferred calls
			// would see that goroutine's continuations, running
			// elsewhere, as their own: scheduler.Current would name a
			// virtual thread that another carrier is running.
			c.parentC, c.parentResolved = nil, true
			c.cancel()
		}()
	}
}

// cancel makes c's body goroutine unwind and exit. The runtime then
// propagates the Goexit to the calling goroutine (as iter.Pull does), so
// cancel never returns normally while the body is alive.
func (c *Cont) cancel() {
	c.state.Store(int32(stCancelling))
	for c.switchIn(reqCancel) {
		// A deferred call yielded while unwinding; keep cancelling.
	}
}

// StackTrace returns the frames of a suspended continuation, innermost
// first, from the yield point down to the body function; frames of nested
// continuations suspended with it come first. It returns nil if c is not
// suspended (never run, running, or done). Concurrent calls take turns:
// each returns the frames, none returns nil because another is reading.
func (c *Cont) StackTrace() []runtime.Frame {
	for !c.state.CompareAndSwap(int32(stSuspended), int32(stTracing)) {
		switch state(c.state.Load()) {
		case stTracing:
			runtime.Gosched() // another StackTrace holds it for a moment
		case stSuspended:
			// The other StackTrace has just ended: try again.
		default:
			return nil
		}
	}
	defer c.state.Store(int32(stSuspended))
	if useStackCopy {
		return c.traceFrozen()
	}
	c.switchIn(reqTrace)
	frames := c.pt.trace
	c.pt.trace = nil
	return frames
}

// collectTrace runs on the body goroutine, parked, and records its frames.
func (c *Cont) collectTrace() {
	var frames []runtime.Frame
	if ch := c.child; ch != nil {
		ch.switchIn(reqTrace)
		frames, ch.pt.trace = ch.pt.trace, nil
	}
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(1, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	c.pt.trace = append(frames, userFrames(pcs)...)
}

// internalFrame reports whether fn belongs to the engine or to the runtime
// machinery that runs a body goroutine.
func internalFrame(fn string) bool {
	return strings.HasPrefix(fn, enginePrefix) || strings.HasPrefix(fn, "runtime.") ||
		strings.HasPrefix(fn, "iter.")
}

// userFrames turns the PCs of a parked body goroutine into the frames a
// user cares about: it drops the engine's frames above the yield point
// (and continuation.Yield itself) and stops at the engine frame that
// called the body.
func userFrames(pcs []uintptr) []runtime.Frame {
	var out []runtime.Frame
	frames := runtime.CallersFrames(pcs)
	top := true
	for {
		f, more := frames.Next()
		switch {
		case top && (internalFrame(f.Function) || f.Function == contYieldName):
			// above the yield point
		case internalFrame(f.Function):
			return out // the body's caller
		default:
			top = false
			out = append(out, f)
		}
		if !more {
			return out
		}
	}
}
