package weft

import (
	"iter"
	"runtime"
	"runtime/debug"
	"strings"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// The portable backend runs each continuation's body on a goroutine of its
// own, created by iter.Pull on the first Run. It switches to and from that
// goroutine with the runtime's coroutine switch (runtime/coro.go). Run
// switches in; a yield switches out.
//
// A switch into the body goroutine carries a request: resume the body, end
// it (the continuation was abandoned), or report its frames (StackTrace).

// portableState is what the portable backend keeps per continuation. It
// holds the body goroutine's coroutine and the request the next switch
// into it carries.
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
	// goroutine, or out of a nested continuation's Run on it. panicStack
	// is the stack trace of the body goroutine where it began
	// (PanicStack). died says the body goroutine ended by it.
	panicked   any
	panicStack []byte
	died       bool
	// duringGoexit says that a deferred call of a runtime.Goexit raised
	// the panic that ended the body goroutine. iter.Pull carries only the
	// panic to Run's caller, which raises it again during a Goexit of its
	// own (raiseDuringGoexit).
	duringGoexit bool
	// locks is the runtime.LockOSThread calls (less UnlockOSThread
	// calls) that the body made and did not undo, which its goroutine
	// undid as it ended (handLocks) for Run's caller to make (takeLocks).
	locks int32
	// labels are the profiler labels of the side that last switched,
	// for the other side to take, when the record leaves labels to its
	// executor (labels_portable.go).
	labels unsafe.Pointer
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
		c.stack.body()
		ended = true
		if c.leavesLabels() {
			c.pt.sendLabels()
		}
	})
}

// handLocks runs as the body goroutine ends, however it ends. The body
// may have locked its thread (runtime.LockOSThread) and not undone it, or
// undone locks it began with. handLocks then puts the goroutine's lock
// count back to base, the count it began with, and records the difference
// for takeLocks. The coroutine switch that ends the goroutine throws if
// the thread locking differs from the coroutine's creation. On both
// backends the goroutine that called Run keeps the body's lock changes:
// here takeLocks makes them on that goroutine.
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

// raiseDuringGoexit raises v again on the goroutine that called Run. v is
// a panic that ended a body goroutine during a runtime.Goexit there. It is
// raised from a deferred call of a Goexit of Run's goroutine, so it
// behaves as in plain Go. A frame that recovers it goes on exiting; if
// none does, it ends the goroutine as a panic. iter.Pull alone would carry
// only the panic.
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
// where it began. That is this goroutine's stack now, unless a nested
// continuation's Run raised r again here and handed down its own stack
// (handPanic). That stack is kept.
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

// ptPanicStack is PanicStack on the portable backend. It answers for a
// panic that iter.Pull raised again on the calling goroutine. That panic
// ended the body goroutine of c (asked from c's Run's caller) or of a
// continuation nested in c (asked from c's body).
func (c *Cont) ptPanicStack(v any) []byte {
	p := c.pt
	if p == nil || p.panicStack == nil || !sameInterface(p.panicked, v) || !pullReraised() {
		return nil
	}
	return p.panicStack
}

// pullReraised reports whether a continuation's Run raised again the panic
// whose deferred calls run on the calling goroutine. Two functions do:
// iter.Pull's next function, called by switchIn, and raisePanic
// (raiseDuringGoexit). An iter.Pull of the body's own raises panics too;
// those have no record here. Only the panic path calls it.
func pullReraised() bool {
	raiser, caller, ok := panicRaiser()
	return ok && (strings.HasPrefix(raiser.Function, "iter.Pull[") && caller.Function == switchInName ||
		raiser.Function == raisePanicName)
}

// panicRaiser returns the frame that raised the panic whose deferred calls
// run on the calling goroutine, and that frame's caller. The raiser is the
// frame under runtime.gopanic, among the innermost 64. Only the panic path
// calls it.
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
	labels := r == reqResume && c.leavesLabels()
	if labels {
		c.pt.sendLabels()
	}
	_, ok := c.pt.next()
	if labels {
		c.pt.receiveLabels()
	}
	return ok
}

// park switches out of the body goroutine and serves requests until one
// says to go on. It reports whether the continuation was abandoned.
func (c *Cont) park() (cancelled bool) {
	if c.pt.panicStack != nil {
		c.pt.panicked, c.pt.panicStack = nil, nil // that panic is over
	}
	labels := c.leavesLabels()
	for {
		if labels {
			c.pt.sendLabels()
		}
		c.pt.yield(struct{}{})
		switch c.pt.req {
		case reqResume:
			if labels {
				c.pt.receiveLabels()
			}
			return false
		case reqCancel:
			return true
		case reqTrace:
			c.collectTrace()
		}
	}
}

// portableLocked reports a yield to t that the portable backend must
// refuse. A goroutine it would park is running a cgo callback, so it is
// locked to its OS thread. The runtime's coroutine switch kills the
// process when a locked goroutine switches to one whose locking differs.
// It checks cur's body goroutine and those of the enclosing continuations
// up to t, which recorded their state when they called Run. Without cgo
// calls there is nothing to check.
//
//go:noinline
func portableLocked(cur, t *Cont) *pinning.Error {
	if runtime.NumCgoCall() == 0 {
		return nil
	}
	if pc := cgoCallbackPC(); pc != 0 {
		return t.pinnedYield(pinning.NativeFrame, pc)
	}
	for x := cur; x != t; x = x.parent() {
		if x.pt != nil && x.pt.callerCgoPC != 0 {
			return t.pinnedYield(pinning.NativeFrame, x.pt.callerCgoPC)
		}
	}
	return nil
}

// cgoCallbackPC returns the PC of a cgo callback frame on the calling
// goroutine's stack, or 0 if there is none.
func cgoCallbackPC() uintptr {
	if runtime.NumCgoCall() == 0 {
		return 0
	}
	// A goroutine running a callback from C is locked to its thread. One
	// that is not locked has none on its stack, and needs no walk. Any
	// program linked with cgo has made a cgo call by the time main runs,
	// so the cgo call count alone does not spare the walk.
	if locked, ok := rt.Locked(); ok && !locked {
		return 0
	}
	return cgoCallbackWalk()
}

// cgoCallbackWalk is cgoCallbackPC's walk of the stack, a function of its
// own: its frame is large, and Yield on the portable backend runs near the
// top of a body goroutine's small stack.
//
//go:noinline
func cgoCallbackWalk() uintptr {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		frames := runtime.CallersFrames(pcs[:n])
		for {
			f, more := frames.Next()
			if strings.HasPrefix(f.Function, "runtime.cgocallback") {
				return f.PC + 1 // a return address, as Frame reports
			}
			if !more {
				break
			}
		}
		if n < len(pcs) {
			return 0
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
}

// suspend parks c's body goroutine as part of a yield to t (c itself or
// a continuation enclosing it) and returns when c is resumed. It reports
// whether c was abandoned instead, in which case the caller must unwind.
func (c *Cont) suspend(t *Cont) (cancelled bool) {
	c.target = t
	if n := c.counters(); n != nil {
		n.yields.Add(1)
	}
	if freezeProf.rate.Load() != 0 {
		profilePortable(false)
	}
	cancelled = c.park()
	if !cancelled && freezeProf.rate.Load() != 0 {
		profilePortable(true)
	}
	return cancelled
}

// mounted runs c on the portable backend; acquire has just moved c to
// mounted. It switches into c's body goroutine until the body finishes,
// panics or exits, or c is suspended by a yield to its own scope.
func (c *Cont) mounted(owner any) {
	c.owner = owner
	c.parentC, c.parentResolved = nil, false
	if c.pt == nil {
		c.start()
	}
	c.pt.callerG = arch.G()
	c.pt.callerCgoPC = cgoCallbackPC()
	if n := c.counters(); n != nil {
		n.runs.Add(1)
	}
	normal := false
	defer func() {
		if !normal { // the body panicked or called runtime.Goexit
			c.pt.takeLocks()
			duringGoexit := c.pt.died && c.pt.duringGoexit
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
	if !c.armed { // its body goroutine waits
		c.arm()
	}
	c.owner = nil
	c.state.Store(int32(stSuspended))
}

// resume switches into c's body goroutine until the body finishes (true)
// or c is suspended by a yield to its own scope (false). A yield to an
// enclosing scope is passed on to the parent, and c is resumed when the
// parent is.
func (c *Cont) resume() (finished bool) {
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
