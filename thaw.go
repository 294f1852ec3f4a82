package weft

import (
	"fmt"
	"runtime"
)

// This file is the resume path shared by both backends: Run, and the
// moves of a continuation's state into and out of mounted. The
// stack-copying mount loop is in thaw_amd64.go. The portable one is in
// portable.go.

// Run mounts c on the calling goroutine and runs it until its body returns
// or it is suspended by a yield to its own scope. owner is the API-level
// handle that Owner reports while c is mounted.
//
// If the body yields to an enclosing scope, Run does not return. Its frame
// is suspended together with the enclosing continuation, and c resumes
// when that one is resumed.
//
// A panic in the body propagates out of Run with its original value.
// runtime.Goexit in the body exits the goroutine that called Run. c is
// done afterwards in both cases. Misuse panics with an error wrapping
// ErrDone or ErrMounted.
func (c *Cont) Run(owner any) {
	// One call, so that Run inlines and puts no frame of its own between
	// its caller and the mount (mount says why that matters).
	c.mount(owner)
}

// acquire moves c from new or suspended to mounted, for a Run that mount's
// first test did not take. It panics as Run documents if c is mounted or
// done. It reports whether mount is to run c on the stack-copying backend.
// On the portable backend it runs c itself.
func (c *Cont) acquire(owner any) (stackCopy bool) {
	for {
		st := state(c.state.Load())
		switch st {
		case stNew, stSuspended:
			if c.state.CompareAndSwap(int32(st), int32(stMounted)) {
				if useStackCopy {
					return true
				}
				c.mounted(owner)
				return false
			}
		case stTracing:
			runtime.Gosched() // StackTrace holds it for a moment
		case stMounted:
			panic(c.mountedError())
		default: // stDone, stCancelling
			panic(c.doneError())
		}
	}
}

//go:noinline
func (c *Cont) doneError() error {
	return fmt.Errorf("continuation.Run on %v: %w: its body has already returned, panicked or called runtime.Goexit (create a new continuation to run it again)", c.scope, ErrDone)
}

//go:noinline
func (c *Cont) mountedError() error {
	if c.onChain() {
		return fmt.Errorf("continuation.Run on %v: %w: Run called from inside the continuation's own body", c.scope, ErrMounted)
	}
	return fmt.Errorf("continuation.Run on %v: %w: it is running on another goroutine, or suspended inside an enclosing continuation (resume that one instead)", c.scope, ErrMounted)
}

// finish marks c done and drops what it no longer needs.
func (c *Cont) finish() {
	c.dropLinks()
	c.dropLabels()
	if c.pt != nil {
		c.pt.next, c.pt.yield = nil, nil
	}
	c.stack.finished(c.reused)
	c.state.Store(int32(stDone))
}
