// Package continuation provides scoped, one-shot delimited continuations
// for Go, modelled on Project Loom's jdk.internal.vm.Continuation, and the
// generators built on them.
//
// A Continuation wraps a body function. Run mounts it on the calling
// goroutine and runs the body until the body returns or calls Yield with
// the continuation's scope; Yield suspends the body, and Run returns. The
// next Run, from any goroutine, resumes the body right after the Yield.
//
//	s := scope.New("gen")
//	c := continuation.New(s, func() {
//		for i := 0; i < 3; i++ {
//			fmt.Println("step", i)
//			continuation.Yield(s)
//		}
//	})
//	for !c.IsDone() {
//		c.Run()
//	}
//
// Scopes delimit continuations: Yield(s) suspends the innermost mounted
// continuation of scope s together with every continuation nested inside
// it, so a body may yield "through" inner continuations to an outer one.
//
// A continuation is one-shot: each suspension is resumed at most once, and
// a finished continuation cannot be run again. Misuse panics with an error
// that wraps ErrDone, ErrMounted or ErrNotInScope.
//
// Pull and Pull2 are drop-in replacements for iter.Pull and iter.Pull2, and
// Coroutine is a typed asymmetric coroutine; all three run on weft's
// continuations, and so on whichever backend is in use (see Backend).
package continuation

import (
	"runtime"

	weft "github.com/weftrt/weft"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// Sentinel errors wrapped by the values that misuse panics with; check a
// recovered value with errors.Is.
var (
	// ErrDone: Run of a continuation that has finished (its body returned,
	// panicked or called runtime.Goexit).
	ErrDone = weft.ErrDone
	// ErrMounted: Run of a continuation that is mounted: running (a Run from
	// inside its own body, or a second concurrent Run, of which exactly one
	// wins), or suspended as part of an enclosing continuation.
	ErrMounted = weft.ErrMounted
	// ErrNotInScope: Yield with a nil scope, or with no continuation of that
	// scope mounted on the calling goroutine; Current with a nil scope.
	ErrNotInScope = weft.ErrNotInScope
)

// Stats counts what a continuation has done; see Continuation.Stats.
type Stats = weft.Stats

// Continuation is a scoped, one-shot delimited continuation. Create it with
// New. Its methods are safe to call from any goroutine.
//
// # Lifetime
//
// A continuation that is dropped while suspended is reclaimed when its
// Continuation becomes unreachable. Its body is then unwound as if by
// runtime.Goexit on an internal goroutine, which runs the body's deferred
// calls (the stack-copying backend thaws the frozen frames there first).
// Where no deferred call is pending, on the stack-copying backend, there
// is nothing to run: the frozen frames are collected with the handle.
// Code that needs its deferred calls to run at a known time must run the
// continuation to completion. A body that keeps a reference to its own
// Continuation in a variable live across a Yield keeps it reachable, and is
// never reclaimed while suspended; use Current inside the body.
type Continuation struct {
	c        *weft.Cont
	onPinned func(*Continuation, pinning.Reason)
}

// Option configures a Continuation.
type Option func(*Continuation)

// WithOnPinned sets the handler called when a Yield that would suspend this
// continuation is pinned (see package pinning). It runs on the goroutine
// that called Yield, inside the body. If it returns, Yield returns false
// and the body goes on running. The default handler panics with a
// *pinning.Error that names the reason and the frame.
func WithOnPinned(f func(c *Continuation, r pinning.Reason)) Option {
	return func(c *Continuation) { c.onPinned = f }
}

// New returns a continuation that will run body, delimited by scope s.
// Nothing runs until the first Run. New panics if s or body is nil.
func New(s *scope.Scope, body func(), opts ...Option) *Continuation {
	if s == nil {
		panic("continuation.New: nil scope (create one with scope.New)")
	}
	if body == nil {
		panic("continuation.New: nil body")
	}
	c := new(Continuation)
	c.init(s, body)
	for _, o := range opts {
		o(c)
	}
	return c
}

// init makes c, which may lie inside a larger object (a generator's
// handle), a continuation that runs body delimited by s. The object
// holding c must not be reachable from body: a suspended continuation is
// reclaimed when that object becomes unreachable.
func (c *Continuation) init(s *scope.Scope, body func()) {
	c.c = weft.NewCont(s, body)
	c.c.SetHandler(&handler)
}

// handler is every continuation's Handler in the engine.
var handler = weft.Handler{Pinned: pinnedHandler, Abandonable: abandonable}

// abandonable makes the collector end the body of the continuation
// handled by owner, with Abandon, if the handle becomes unreachable while
// the continuation is suspended. The engine calls it only once the body
// holds something to end: deferred calls, or a goroutine.
func abandonable(c *weft.Cont, owner any) {
	if h, ok := owner.(*Continuation); ok {
		runtime.AddCleanup(h, (*weft.Cont).Abandon, c)
	}
}

// Run mounts the continuation on the calling goroutine and runs it until
// its body returns or it yields to its scope. If the body yields to an
// enclosing scope instead, Run's own frame is suspended with the enclosing
// continuation, and Run returns only after that one is resumed and this
// continuation finishes or yields to its own scope.
//
// A panic in the body propagates out of Run with its original value, and
// the continuation is then done; runtime.Goexit in the body exits the
// goroutine that called Run. Run panics with an error wrapping ErrDone if
// the continuation is done, and ErrMounted if it is mounted.
func (c *Continuation) Run() {
	c.c.Run(c)
	// The handle stays reachable until the engine has marked the
	// continuation suspended: its cleanup, Abandon, does nothing to one
	// still mounted, and would leave it unreclaimed for good.
	runtime.KeepAlive(c)
}

// IsDone reports whether the body has finished: returned, panicked or
// called runtime.Goexit.
func (c *Continuation) IsDone() bool { return c.c.IsDone() }

// Scope returns the scope the continuation is delimited by.
func (c *Continuation) Scope() *scope.Scope { return c.c.Scope() }

// StackTrace returns the frames of a suspended continuation, innermost
// first: from the function that called Yield down to the body. Frames of
// nested continuations suspended with it (by a yield to this
// continuation's scope from inside them) come first. It returns nil when
// the continuation is not suspended on its own scope: not yet run,
// running, done, or suspended inside an enclosing continuation (whose
// StackTrace includes these frames). It may be called from several
// goroutines at once: the calls take turns, and each returns the frames.
func (c *Continuation) StackTrace() []runtime.Frame {
	frames := c.c.StackTrace()
	runtime.KeepAlive(c) // as in Run: the trace holds the continuation's state
	return frames
}

// PanicStack returns where a panic with value v began, as runtime.Stack
// formats a goroutine's trace, for a deferred call that recovered v where
// the frames it began in are no longer on the stack; it returns nil where
// the deferred call's own stack (debug.Stack) has them. Two cases:
//
//   - Asked from c's body, for a panic that reached frames of the body
//     still frozen by an earlier Yield (with deferred calls pending), or
//     that ended a continuation nested in c: the engine raised it again
//     there, after the frames where it began had unwound.
//   - Asked from the goroutine that called c's Run, for a panic that
//     ended c's body: on the portable backend, where the body ran on a
//     goroutine of its own and Run raised the panic again; on the
//     stack-copying one, where the panic ended the body after the engine
//     had raised it again (the first case).
//
// v is matched by its interface words, not ==; the answer is nil once c
// has yielded since. The result must not be modified.
func (c *Continuation) PanicStack(v any) []byte { return c.c.PanicStack(v) }

// Stats returns the continuation's counters: calls to Run that mounted it
// (a continuation resumed as part of an enclosing one is not counted
// again), suspensions, pinned yields, and on the stack-copying backend the
// frames and bytes frozen and thawed.
func (c *Continuation) Stats() Stats { return c.c.Stats() }

// String describes the continuation for diagnostics.
func (c *Continuation) String() string { return "continuation on " + c.c.Scope().String() }

// Yield suspends the innermost continuation of scope s mounted on the
// calling goroutine, and every continuation nested inside it, and returns
// true when it is resumed.
//
// If the yield is pinned (see package pinning), nothing is suspended: the
// onPinned handler of the continuation of scope s is called and, if it
// returns, Yield returns false and the body goes on running.
//
// Yield panics with an error wrapping ErrNotInScope if s is nil or no
// continuation of scope s is mounted on the calling goroutine.
func Yield(s *scope.Scope) bool {
	// Small enough to inline: the body's frame calls the engine directly,
	// one frame fewer to freeze, thaw and return through on every yield.
	// The engine calls pinnedHandler for a pinned yield.
	_, perr := weft.Yield(s)
	return perr == nil
}

// pinnedHandler is every continuation's pinned-yield handler in the
// engine: it calls the onPinned handler of the continuation the yield
// named (mounted, so its owner is its handle), or panics without one. It
// is a plain function, so that the engine's record of a continuation does
// not refer back to the handle (runtime.AddCleanup needs that).
func pinnedHandler(t *weft.Cont, perr *pinning.Error) {
	// A continuation unwound after it was dropped has no handle (see
	// Current); Yield unwinds before it could get here, but if it did, the
	// pinned yield panics as without a handler.
	h, _ := t.Owner().(*Continuation)
	if h == nil || h.onPinned == nil {
		panic(perr)
	}
	h.onPinned(h, perr.Reason)
}

// Current returns the innermost continuation of scope s mounted on the
// calling goroutine, or nil if there is none. It panics with an error
// wrapping ErrNotInScope if s is nil.
//
// In the deferred calls of a dropped continuation, which run after its
// handle has been collected (see Lifetime), Current of its scope returns
// nil: there is no handle left to return.
func Current(s *scope.Scope) *Continuation {
	t := weft.Current(s)
	if t == nil {
		return nil
	}
	// A continuation unwound after it was dropped is mounted without an
	// owner: its handle is gone (weft.Cont.Abandon).
	h, _ := t.Owner().(*Continuation)
	return h
}

// Backend describes the backend running continuations in this process and
// why it was chosen, for example "portable (WEFT_BACKEND=portable)". The
// environment variable WEFT_BACKEND, read at start-up, selects it.
func Backend() string { return weft.Backend() }
