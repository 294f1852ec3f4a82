//go:build amd64 && !race && !msan && !asan

package weft

import (
	"reflect"
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file is the Go side of the return barrier (arch.Thaw). It handles a
// panic or runtime.Goexit that crosses the barrier while frozen frames
// hold deferred calls. It also makes the results a thawed frame continues
// with (the rethrow entries). The barrier's assembly is in
// arch/switch_amd64.s.

// rethrowLoop follows arch.Enter(&c.chunk.Link, host). While the host
// returns because crossing recovered a panic at the barrier, it raises the
// panic again in the innermost frozen frame with a deferred call pending.
// It enters the host again with frozenPanic as the rethrow. The frames in
// between have no deferred calls, so they unwind as if the panic had
// passed them.
func (c *stackState) rethrowLoop() {
	for c.rethrow {
		c.rethrow = false
		c.chunk.dropToDefers()
		c.mode = rethrowPanic
		arch.Enter(&c.chunk.Link, host)
	}
}

// crossing runs when the host frame unwinds. A panic or runtime.Goexit
// that reaches the barrier must run the deferred calls of the frozen
// frames, innermost first, and recover must work in them as in plain Go.
// Frozen frames with nothing pending are dropped with the continuation.
// The panic then goes on untouched, with its original stack for the crash
// report. Otherwise a panic is recovered here and raised again from the
// innermost frame that has deferred calls (rethrowLoop). Goexit cannot be
// recovered. So the frames are thawed above this deferred call, and Goexit
// is called again from there. It runs their deferred calls, then those of
// this frame's callers, and ends the goroutine.
func (c *stackState) crossing(finished *bool) {
	if *finished || !c.chunk.deferPending() {
		return
	}
	c.chunk.unwound++
	if r := recover(); r != nil {
		rr := c.rareState()
		rr.thrown = r
		// The frames the panic unwound are still on the stack here, under
		// this deferred call; they are not once frozenPanic raises it
		// again. A panic frozenPanic raised has none of its own: the
		// stack where it was first raised is kept (or was handed over by
		// a nested continuation it ended).
		if !reraised() || rr.crossedStack == nil || !sameInterface(rr.crossed, r) {
			rr.crossed, rr.crossedStack = r, debug.Stack()
		}
		if goexitAbove(unsafe.Pointer(finished)) {
			// The panic was raised by a deferred call of a
			// runtime.Goexit that began above the barrier. Once this
			// deferred call returns, the runtime goes on with that
			// Goexit, not with the host's caller, so rethrowLoop
			// would never run. Raise the panic again from here instead,
			// as a deferred call of a Goexit of the thawed frames'
			// own (frozenGoexitPanic): a frame that recovers it then
			// goes on exiting, as in plain Go, and never returns.
			c.chunk.dropToDefers()
			c.mode = rethrowGoexitPanic
			thawHost(&c.chunk.Link)
			return
		}
		c.rethrow = true
		return
	}
	// runtime.Goexit (recover reports no panic, and stops none: with
	// GODEBUG=panicnil=1 a panic(nil) is taken for a Goexit).
	c.chunk.dropToDefers()
	c.mode = rethrowGoexit
	thawHost(&c.chunk.Link)
}

// goexitEntry is runtime.Goexit's entry PC.
var goexitEntry = reflect.ValueOf(runtime.Goexit).Pointer()

// goexitAbove reports whether a runtime.Goexit runs between its caller
// (crossing, a deferred call of the host frame) and the host frame that
// holds inHost. That is, whether the panic crossing recovers was raised
// during a Goexit that began above the barrier. The runtime resumes such a
// Goexit when the recovering deferred call returns. Recovery never jumps
// past a pending Goexit, and a Goexit frame on the stack is still running.
// The host frame is found by its address, not its code. Every host runs the
// same function, and a nested continuation's host may lie in between. The
// walk is of physical frames, with the runtime's metadata, as a capture's.
// Only a panic crossing the barrier with deferred calls pending gets here.
//
//go:noinline
func goexitAbove(inHost unsafe.Pointer) bool {
	if g := rt.CurG(); uintptr(inHost) < g.StackLo || uintptr(inHost) >= g.StackHi {
		// Not in a frame (a compiler that moved the flag to the heap):
		// leave the panic to rethrowLoop, as before this check existed,
		// rather than walk past the host.
		return false
	}
	pc, sp := arch.CallerPCSP()
	for fr := rt.FrameAt(pc, sp); fr.Fn.Valid(); fr = fr.Caller() {
		if uintptr(fr.SP) <= uintptr(inHost) && uintptr(inHost) < uintptr(fr.FP) {
			return false // the host frame
		}
		if fr.Fn.Entry() == goexitEntry {
			return true
		}
	}
	return false
}

// barrierPanicStack is PanicStack on this backend. Asked from c's body, it
// is the panic recorded at c's barrier. Once a panic raised again at the
// barrier has ended c's body, it is the one handCrossed kept for Run's
// caller.
func (c *Cont) barrierPanicStack(v any) []byte {
	if r := c.stack.rare; r != nil && r.crossedStack != nil && sameInterface(r.crossed, v) {
		if !reraised() {
			return nil
		}
		return r.crossedStack
	}
	if p := c.pt; p != nil && p.panicStack != nil && sameInterface(p.panicked, v) && reraised() {
		return p.panicStack
	}
	return nil
}

// frozenPanicEntry is frozenPanic's entry PC.
var frozenPanicEntry = reflect.ValueOf(frozenPanic).Pointer()

// reraised reports whether frozenPanic raised the panic whose deferred
// calls run on the calling goroutine. It is, if the frame under the
// runtime's panic is frozenPanic's. Only the panic path calls it.
func reraised() bool {
	raiser, _, ok := panicRaiser()
	return ok && raiser.Entry == frozenPanicEntry
}

// frozenPanic raises the panic in stackState.thrown again. arch.Thaw enters it
// as if the innermost thawed frame had called it where that frame
// continues.
func frozenPanic() {
	l := gls.Current()
	c := contOf(l)
	v := c.stack.rare.thrown
	c.stack.rare.thrown = nil
	panic(v)
}

// frozenGoexit continues a runtime.Goexit in thawed frames, as frozenPanic
// continues a panic.
func frozenGoexit() {
	runtime.Goexit()
}

// frozenGoexitPanic raises the panic in stackState.thrown again in thawed
// frames, from a deferred call of a runtime.Goexit. crossing uses it for a
// panic raised during a Goexit. If a frame recovers the panic, the Goexit
// goes on. The deferred call is frozenPanic, so that reraised knows it.
func frozenGoexitPanic() {
	defer frozenPanic()
	runtime.Goexit()
}

// yieldReturn ends a weft.Yield whose frame the capture left out
// (stackState.leave), on a resume after a failed freeze of an enclosing
// continuation or after an abandonment. arch.Thaw calls it as if Yield's
// caller had called it where Yield returns, so its results are Yield's.
// It reports the failed freeze, or unwinds. Every other resume continues
// that frame with Yield's usual results in the result registers
// (thawYield).
func yieldReturn() (*Cont, *pinning.Error) {
	c := contOf(gls.Current())
	s, t := &c.stack, c.target
	if s.rare != nil && s.rare.pinErr != nil {
		return t, t.pinnedFrom(s.takePinErr())
	}
	if s.cancel {
		runtime.Goexit()
	}
	return t, nil
}

// How the host thaws the next record (stackState.mode). thawResume
// continues its innermost frame as if its call to capture had returned
// nil. thawYield continues it as if its call to Yield, which the capture
// left out, had returned the continuation it suspended and nil. The others
// call a function from that frame, as if it had called it. Their entries
// are in rethrowPCs (arch.Thaw's rethrow).
const (
	thawResume uint8 = iota
	thawYield
	rethrowYieldReturn
	rethrowPanic
	rethrowGoexit
	rethrowGoexitPanic
)

var rethrowPCs = [...]uintptr{
	thawResume:         0,
	thawYield:          0,
	rethrowYieldReturn: reflect.ValueOf(yieldReturn).Pointer(),
	rethrowPanic:       reflect.ValueOf(frozenPanic).Pointer(),
	rethrowGoexit:      reflect.ValueOf(frozenGoexit).Pointer(),
	rethrowGoexitPanic: reflect.ValueOf(frozenGoexitPanic).Pointer(),
}

// aborted ends c, whose body panicked or called runtime.Goexit while
// mount ran it. It unbinds c if c is still bound, and hands on the panic
// c's barrier recorded. c may be unbound already: in a yield to an
// enclosing scope, the unwinding may begin between an unbinding and the
// next binding. Only mount's deferred call calls it.
//
//go:noinline
func (c *Cont) aborted() {
	if l := gls.Current(); l == &c.local {
		// The goroutine's slot, from binding c again, and what the
		// binding replaced, which mount kept in c.parentC.
		slot, _ := gls.Push(l)
		c.unmount(slot, (*gls.Local)(unsafe.Pointer(c.parentC)))
	}
	c.handCrossed()
	if pendingThaws.n.Load() != 0 { // a sampled thaw's run ends unrecorded
		takePendingThaw(&c.stack.chunk)
	}
	c.finish()
}

// handCrossed gives the panic c's barrier recorded (stackRare.crossed) to
// the continuation whose body mounted c, as c ends by a panic. That panic,
// raised again at c's barrier, goes on into the parent's frames. It may
// reach the parent's barrier, which must know it too. handCrossed also
// keeps it for the deferred calls of Run's caller, which see it raised
// again, without the frames where it began. c.pt holds it past finish
// (which drops c.stack.rare) for barrierPanicStack; this backend has no
// other use for c.pt. The portable backend keeps such a panic the same way.
func (c *Cont) handCrossed() {
	r, p := c.stack.rare, c.parentC
	if r == nil || r.crossedStack == nil {
		return
	}
	c.pt = &portableState{panicked: r.crossed, panicStack: r.crossedStack}
	if p == nil {
		return
	}
	pr := p.stack.rareState()
	pr.crossed, pr.crossedStack = r.crossed, r.crossedStack
}
