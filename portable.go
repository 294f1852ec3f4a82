package weft

import (
	"iter"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// The portable backend runs each continuation's body on a goroutine of its
// own, created by iter.Pull on the first Run, and switches to and from it
// with the runtime's coroutine switch (runtime/coro.go), the cheapest
// goroutine switch Go has. Run switches in; a yield switches out.
//
// A switch into the body goroutine carries a request: resume the body, end
// it (the continuation was abandoned), or report its frames (StackTrace).

// portableState is what the portable backend keeps per continuation: the
// body goroutine's coroutine and the request the next switch into it
// carries.
type portableState struct {
	next  func() (struct{}, bool)
	yield func(struct{}) bool
	req   request
	trace []runtime.Frame
	// callerCgoPC is the PC of a cgo callback frame on the stack of the
	// goroutine that called Run, or 0.
	callerCgoPC uintptr
	// callerG is the goroutine that called Run (an arch.G value), whose
	// record, if any, is the parent continuation's (Cont.parent).
	callerG uintptr

	// panicked is the value of the panic that last ran out of the body
	// goroutine, or out of a nested continuation's Run on it, and
	// panicStack the stack trace of the body goroutine where that panic
	// began (PanicStack); died says the body goroutine ended by it.
	panicked   any
	panicStack []byte
	died       bool
	// duringGoexit says that the panic that ended the body goroutine was
	// raised during a runtime.Goexit there (by one of its deferred
	// calls): iter.Pull carries only the panic to Run's caller, which
	// raises it again during a Goexit of its own (raiseDuringGoexit).
	duringGoexit bool
	// locks is the runtime.LockOSThread calls (less UnlockOSThread
	// calls) that the body made and did not undo, which its goroutine
	// undid as it ended (handLocks) for Run's caller to make (takeLocks).
	locks int32
}

type request uint8

const (
	reqResume request = iota
	reqCancel
	reqTrace
)

// start creates the body goroutine. It begins running the body at the
// first switch in, which is always a resume: a continuation that has never
// run has no frames to trace and nothing to cancel.
func (c *Cont) start() {
	c.pt = new(portableState)
	c.pt.next, _ = iter.Pull(func(yield func(struct{}) bool) {
		c.pt.yield = yield
		c.startLabels()
		// The thread locking the runtime requires at every switch
		// (runtime/coro.go): the body goroutine's own, inherited from
		// the goroutine that first ran it.
		c.local.Locks = rt.CurLockCount()
		defer c.pt.handLocks(c.local.Locks) // first in, so last out
		g := gls.Bind(&c.local)
		defer gls.Unbind(g)
		ended := false
		defer func() {
			if ended || !unwindingPanic() {
				return // the body returned, or runtime.Goexit (a cancel too)
			}
			// iter.Pull raises the panic again in the goroutine that
			// called Run, whose deferred calls see a stack without the
			// frames where it began: keep those for PanicStack.
			r := recover()
			if r == nil {
				// panic(nil) under GODEBUG=panicnil=1, which recover
				// has stopped: iter.Pull ends the calling goroutine
				// with runtime.Goexit for it, as it would have.
				runtime.Goexit()
			}
			c.pt.keepPanic(r)
			c.pt.duringGoexit = goexitPending()
			panic(r)
		}()
		c.sc.body()
		ended = true
	})
}

// handLocks runs as the body goroutine ends, however it ends: if the body
// locked its thread (runtime.LockOSThread) and did not undo it, or undid
// locks it began with, it puts the goroutine's lock count back to base,
// the count it began with, and records the difference for takeLocks. The
// runtime's coroutine switch, which ends the goroutine, throws (a fatal
// error, not a panic) if the thread locking differs from the coroutine's
// creation; on the stack-copying backend the body runs on the goroutine
// that called Run, which keeps the lock, and so it does here: takeLocks
// makes the calls on that goroutine.
func (p *portableState) handLocks(base uint32) {
	for n := rt.CurLockCount(); n != base; {
		if n > base {
			runtime.UnlockOSThread()
			n--
			p.locks++
		} else {
			runtime.LockOSThread()
			n++
			p.locks--
		}
	}
}

// takeLocks makes, on the goroutine that called Run, the lock changes the
// body goroutine undid as it ended (handLocks).
func (p *portableState) takeLocks() {
	for ; p.locks > 0; p.locks-- {
		runtime.LockOSThread()
	}
	for ; p.locks < 0; p.locks++ {
		runtime.UnlockOSThread()
	}
}

// unwindingPanic reports whether the deferred call that calls it runs
// because of a panic, not runtime.Goexit. Only the paths that end a body
// goroutine abnormally call it.
func unwindingPanic() bool {
	var pcs [8]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		switch f.Function {
		case "runtime.gopanic":
			return true
		case "runtime.Goexit":
			return false
		}
		if !more {
			return false
		}
	}
}

// goexitPending reports whether a runtime.Goexit runs on the calling
// goroutine: whether a panic unwinding it was raised during one. Only the
// path of a panic that ends a body goroutine calls it.
func goexitPending() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		if n == len(pcs) {
			pcs = make([]uintptr, 2*len(pcs))
			continue
		}
		frames := runtime.CallersFrames(pcs[:n])
		for more := n > 0; more; {
			var f runtime.Frame
			if f, more = frames.Next(); f.Function == "runtime.Goexit" {
				return true
			}
		}
		return false
	}
}

// raiseDuringGoexit raises v, a panic that ended a body goroutine during a
// runtime.Goexit there, again on the goroutine that called Run, from a
// deferred call of a Goexit of that goroutine's own, so that it behaves as
// in plain Go: a frame that recovers it goes on exiting, and if nothing
// does, it ends the goroutine as a panic. (iter.Pull, which carries a
// panic or a Goexit to its caller, would carry only the panic.)
func raiseDuringGoexit(v any) {
	defer raisePanic(v)
	runtime.Goexit()
}

// raisePanic panics with v: raiseDuringGoexit's deferred call, which
// pullReraised knows by name.
//
//go:noinline
func raisePanic(v any) { panic(v) }

// raisePanicName is raisePanic's name in the runtime's tables.
var raisePanicName = enginePrefix + "raisePanic"

// keepPanic records the panic r that is ending the body goroutine, and
// where it began: the stack of this goroutine now, unless r is the panic
// a nested continuation's Run raised again here and handed down with its
// own stack (handPanic), which is kept.
func (p *portableState) keepPanic(r any) {
	if p.panicStack == nil || !sameInterface(p.panicked, r) || !pullReraised() {
		p.panicked, p.panicStack = r, debug.Stack()
	}
	p.died = true
}

// handPanic gives the panic that ended c's body goroutine (keepPanic) to
// the continuation whose body called c's Run, where iter.Pull raises it
// again. Called on that goroutine, as the panic leaves c's Run.
func (c *Cont) handPanic() {
	p := c.pt
	if p == nil || !p.died {
		return
	}
	if q := c.parent(); q != nil && q.pt != nil {
		q.pt.panicked, q.pt.panicStack = p.panicked, p.panicStack
	}
}

// ptPanicStack is PanicStack on the portable backend, which answers for a
// panic that iter.Pull raised again on the calling goroutine: one that
// ended the body goroutine of c (asked from c's Run's caller) or of a
// continuation nested in c (asked from c's body).
func (c *Cont) ptPanicStack(v any) []byte {
	p := c.pt
	if p == nil || p.panicStack == nil || !sameInterface(p.panicked, v) || !pullReraised() {
		return nil
	}
	return p.panicStack
}

// pullReraised reports whether the panic whose deferred calls are running
// on the calling goroutine was raised again by a continuation's Run: by
// iter.Pull's next function, which raises the panic that ended its
// sequence's goroutine, called by switchIn, or by raisePanic, which raises
// such a panic again during a Goexit (raiseDuringGoexit). (An iter.Pull of
// the body's own raises panics too, which have no record here.) Only the
// panic path calls it.
func pullReraised() bool {
	raiser, caller, ok := panicRaiser()
	return ok && (strings.HasPrefix(raiser.Function, "iter.Pull[") && caller.Function == switchInName ||
		raiser.Function == raisePanicName)
}

// panicRaiser returns the frame that raised the panic whose deferred calls
// are running on the calling goroutine (the frame under runtime.gopanic)
// and that frame's caller, looking at the innermost 64 frames. Only the
// panic path calls it.
func panicRaiser() (raiser, caller runtime.Frame, ok bool) {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for more := true; more; {
		var f runtime.Frame
		if f, more = frames.Next(); f.Function != "runtime.gopanic" {
			continue
		}
		if !more {
			return raiser, caller, false
		}
		if raiser, more = frames.Next(); more {
			caller, _ = frames.Next()
		}
		return raiser, caller, true
	}
	return raiser, caller, false
}

// switchInName is switchIn's name in the runtime's tables (an inlined
// call keeps its own frame in runtime.CallersFrames).
var switchInName = enginePrefix + "(*Cont).switchIn"

// switchIn switches into the body goroutine with request r and returns when
// it switches out again: true if it parked, false if the body finished. A
// panic or Goexit in the body propagates from here.
func (c *Cont) switchIn(r request) bool {
	c.pt.req = r
	_, ok := c.pt.next()
	return ok
}

// park switches out of the body goroutine and serves requests until one
// says to go on. It reports whether the continuation was abandoned.
func (c *Cont) park() (cancelled bool) {
	if c.pt.panicStack != nil {
		c.pt.panicked, c.pt.panicStack = nil, nil // that panic is over
	}
	for {
		c.pt.yield(struct{}{})
		switch c.pt.req {
		case reqResume:
			return false
		case reqCancel:
			return true
		case reqTrace:
			c.collectTrace()
		}
	}
}

// Abandon ends a suspended continuation that nobody can resume any more: its
// body unwinds as if by runtime.Goexit, running its deferred calls, on an
// internal goroutine (on the portable backend its body goroutine, switched
// into; on the stack-copying one a fresh goroutine the frozen frames are
// thawed onto), which then exits. Package continuation calls it from a
// cleanup when the handle of a suspended continuation becomes unreachable.
// It does nothing unless c is suspended.
func (c *Cont) Abandon() {
	if c.state.CompareAndSwap(int32(stSuspended), int32(stCancelling)) {
		go func() {
			defer c.finish()
			if !useStackCopy {
				// A body that ends locked leaves the lock to this
				// goroutine (takeLocks), which ends with it.
				defer c.pt.takeLocks()
			}
			if useStackCopy {
				c.scCancel()
				return
			}
			// No Run mounts it: its body unwinds inside nothing, as on
			// scCancel's fresh goroutine. Left unresolved, its parent
			// would be read from the goroutine that last ran it
			// (Cont.parent), and the deferred calls would see that
			// goroutine's continuations, running elsewhere, as their
			// own: scheduler.Current would name a virtual thread that
			// another carrier is running.
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
// suspended (never run, running, or done).
func (c *Cont) StackTrace() []runtime.Frame {
	if !c.state.CompareAndSwap(int32(stSuspended), int32(stTracing)) {
		return nil
	}
	defer c.state.Store(int32(stSuspended))
	if useStackCopy {
		return c.scTrace()
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

// The engine recognises its own frames, and those of packages continuation
// and scheduler, by their functions' names in the runtime's tables. The
// module path in those names comes from functions' own names rather than
// from a string literal, so that a copy of the module under another path
// (a fork, a renamed vendored copy) still recognises every one of them.
// The linker escapes the dots of the last element of a package path
// ("example.com/weft.v1" names its functions "example.com/weft%2ev1.F"),
// so this package's prefix comes from one of its own functions and the
// module path from a subpackage's (pinning.Do's). The function is
// nameAnchor, which calls nothing, so that these variables depend on
// nothing else of the engine's.
var (
	// enginePrefix is the prefix of the names of this package's functions:
	// the module path, escaped as the linker does, and a dot.
	enginePrefix = strings.TrimSuffix(funcName(nameAnchor), "nameAnchor")
	// modulePath is the module's path, which the names of the functions of
	// its other packages start with.
	modulePath = strings.TrimSuffix(funcName(pinning.Do), "/pinning.Do")
	// yieldName is weft.Yield's name in the runtime's tables.
	yieldName = enginePrefix + "Yield"
	// contYieldName is continuation.Yield's name, which calls weft.Yield.
	contYieldName = modulePath + "/continuation.Yield"
)

// nameAnchor is the function whose name gives enginePrefix.
func nameAnchor() {}

// funcName returns the name of the function f (a func value of a
// top-level function or method expression) in the runtime's tables.
func funcName(f any) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
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
