package weft

import (
	"fmt"
	"runtime"

	"github.com/weftrt/weft/arch"
)

// This file is the resume path: mount a continuation on the calling
// goroutine and run it until it finishes or is suspended again. On the
// portable backend "thawing" means switching into the body goroutine; on
// the stack-copying backend it means copying the frames in the stack chunk
// back onto the calling goroutine (scResume).

// Run mounts c on the calling goroutine and runs it until its body returns
// or it is suspended by a yield to its own scope. owner is the API-level
// handle that Owner reports while c is mounted.
//
// If the body yields to an enclosing scope, Run does not return: its frame
// is suspended together with the enclosing continuation, and c resumes when
// that one is resumed.
//
// A panic in the body propagates out of Run with its original value, and
// runtime.Goexit in the body exits the goroutine that called Run; c is done
// afterwards in both cases. Misuse panics with an error wrapping ErrDone
// or ErrMounted.
func (c *Cont) Run(owner any) {
	// One call, so that Run inlines and puts no frame of its own between
	// its caller and the mount (scMount says why that matters).
	c.scMount(owner)
}

// acquire moves c from new or suspended to mounted, for a Run that did
// not find it suspended on the stack-copying backend (scMount's first
// test), and panics as Run documents if c is mounted or done. It reports
// whether scMount is to go on and run c on the stack-copying backend;
// on the portable one it runs c itself.
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

func (c *Cont) mounted(owner any) {
	c.owner = owner
	c.parentC, c.parentResolved = nil, false
	if !useStackCopy {
		if c.pt == nil {
			c.start()
		}
		c.pt.callerG = arch.G()
		c.pt.callerCgoPC = cgoCallbackPC()
	}
	c.countRun()
	normal := false
	defer func() {
		if !normal { // the body panicked or called runtime.Goexit
			if c.pt != nil {
				c.pt.takeLocks()
			}
			duringGoexit := c.pt != nil && c.pt.died && c.pt.duringGoexit
			c.handPanic()
			c.finish()
			if duringGoexit {
				if r := recover(); r != nil {
					raiseDuringGoexit(r)
				}
			}
		}
	}()
	finished := c.resume()
	normal = true
	if finished {
		c.pt.takeLocks()
		c.finish()
		return
	}
	c.owner = nil
	c.state.Store(int32(stSuspended))
}

// resume switches into c's body until the body finishes (true) or c is
// suspended by a yield to its own scope (false). A yield to an enclosing
// scope is passed on to the parent, and c is resumed when the parent is.
func (c *Cont) resume() (finished bool) {
	if useStackCopy {
		return c.scResume()
	}
	if c.pt == nil {
		c.start()
	}
	for {
		if !c.switchIn(reqResume) {
			return true
		}
		t := c.target
		if t == c {
			return false
		}
		// The yield named an enclosing scope: this goroutine runs the
		// parent's body, so suspend the parent too, with c inside it.
		p := c.parent()
		p.child = c
		cancelled := p.suspend(t)
		p.child = nil
		if cancelled {
			c.cancel() // unwinds c's body, then this goroutine; does not return
		}
	}
}

// finish marks c done and drops what it no longer needs.
func (c *Cont) finish() {
	c.dropLinks()
	c.dropLabels()
	if c.pt != nil {
		c.pt.next, c.pt.yield = nil, nil
	}
	c.sc.finished(c.reused)
	c.state.Store(int32(stDone))
}
