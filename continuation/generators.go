package continuation

import (
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/scope"
)

// Pull converts the push-style iterator seq into a pull-style iterator
// accessed by next and stop, with exactly the contract of iter.Pull:
//
//   - next returns the next value and true, or the zero value and false
//     when the sequence is over or stop has been called;
//   - stop ends the iteration; it must be called when the caller is no
//     longer interested in next values and next has not yet returned false.
//     It is valid to call stop several times and after next has returned
//     false; if seq is suspended in yield, yield returns false;
//   - if seq panics, the call to next or stop that was running it panics
//     with the same value, and later calls report the sequence over;
//   - next and stop must not be called from several goroutines at once.
//
// Unlike iter.Pull, seq runs on a weft continuation: with the stack-copying
// backend it runs on the goroutine that calls next, and a Pull whose next
// and stop are both dropped without calling stop is reclaimed instead of
// leaking its goroutine. A concurrent or re-entrant call to next or stop
// panics with an error wrapping ErrMounted, and the call running seq goes
// on unharmed; a yield from a goroutine other than the one running seq
// panics with an error wrapping ErrNotInScope, before it hands anything
// over; a yield
// that is pinned (inside pinning.Do, with the thread locked since seq was
// last resumed, in a cgo callback, or on the stack-copying backend a frame
// that cannot be frozen) panics with a *pinning.Error, which
// propagates out of next like any panic in seq.
func Pull[V any](seq iter.Seq[V]) (next func() (V, bool), stop func()) {
	return pull(seq, "continuation.Pull")
}

// Pull2 converts the push-style iterator seq into a pull-style iterator
// accessed by next and stop, with exactly the contract of iter.Pull2; see
// Pull.
func Pull2[K, V any](seq iter.Seq2[K, V]) (next func() (K, V, bool), stop func()) {
	next1, stop := pull(func(yield func(pair[K, V]) bool) {
		seq(func(k K, v V) bool { return yield(pair[K, V]{k, v}) })
	}, "continuation.Pull2")
	return func() (K, V, bool) {
		kv, ok := next1()
		return kv.k, kv.v, ok
	}, stop
}

// pair is what a Pull2's sequence hands over through the Pull under it.
type pair[K, V any] struct {
	k K
	v V
}

// pull is Pull; name prefixes its panics. next and the yield function seq
// gets are closures with the whole protocol in them: each is one frame,
// between the caller and the mount and between seq and the engine's
// Yield, frozen, thawed and returned through on every value.
func pull[V any](seq iter.Seq[V], name string) (next func() (V, bool), stop func()) {
	p := new(puller[V])
	p.s.Init(name)
	h := &pullHandle[V]{p: p, name: name}
	yield := func(v V) bool {
		if p.stopped.Load() {
			return false
		}
		mustBeIn(&p.s)
		p.v = v
		Yield(&p.s)
		return !p.stopped.Load()
	}
	h.c.init(&p.s, func() { seq(yield) })
	// next releases busy without a defer: if seq panics or calls
	// runtime.Goexit through it, the continuation is done, and every later
	// call sees that before it claims busy.
	next = func() (v V, ok bool) {
		c := &h.c
		if p.stopped.Load() || c.IsDone() {
			return v, false
		}
		p.claim(name, "next")
		if !p.started.Load() {
			p.started.Store(true)
		}
		c.Run()
		if c.IsDone() {
			p.busy.Store(false)
			return v, false
		}
		v = p.v
		var v0 V
		p.v = v0 // do not keep the value alive
		p.busy.Store(false)
		return v, true
	}
	return next, h.stop
}

// puller is the state a Pull shares between its body and its next and stop
// functions. The body must not refer to the pullHandle, so that dropping
// next and stop makes the Continuation unreachable.
type puller[V any] struct {
	s scope.Scope // in the puller's allocation
	v V
	// started: next has run seq; stopped: stop has been called. Atomic so
	// that a concurrent next or stop (misuse) gets ErrMounted rather than
	// a data race on these flags.
	started atomic.Bool
	stopped atomic.Bool
	// busy is held by a next or stop from before it hands a value over
	// until after it has taken the one back: a concurrent or re-entrant
	// call panics instead of exchanging values with the running one.
	busy atomic.Bool
}

// claim takes p.busy for a call of next or stop, or panics with an error
// wrapping ErrMounted.
func (p *puller[V]) claim(name, call string) {
	if !p.busy.CompareAndSwap(false, true) {
		busyPanic(name, call+" called while a call of next or stop runs the sequence")
	}
}

func busyPanic(name, what string) {
	panic(fmt.Errorf("%s: %s (from inside it, or from another goroutine): %w", name, what, ErrMounted))
}

// mustBeIn panics as Yield(s) does when no continuation of s is mounted on
// the calling goroutine: a generator's yield checks this before it writes
// the value it hands over, which a yield from another goroutine would
// otherwise write under the feet of the one running the body. The usual
// case, the innermost continuation's, is a load and a compare.
func mustBeIn(s *scope.Scope) {
	if c := weft.Innermost(); c == nil || c.Scope() != s {
		mustBeInOuter(s)
	}
}

func mustBeInOuter(s *scope.Scope) {
	if weft.Current(s) == nil {
		Yield(s) // panics with ErrNotInScope
		panic("continuation: internal error: Yield outside its scope returned")
	}
}

// pullHandle is what a Pull's next and stop refer to: its continuation,
// in the same allocation, and the state shared with the body. Only next
// and stop refer to it, so dropping both reclaims the continuation.
type pullHandle[V any] struct {
	c    Continuation
	p    *puller[V]
	name string
}

// stop is a Pull's stop.
func (h *pullHandle[V]) stop() {
	p, c := h.p, &h.c
	if p.stopped.Load() || c.IsDone() {
		p.stopped.Store(true)
		return
	}
	p.claim(h.name, "stop")
	if !p.stopped.Swap(true) && p.started.Load() {
		c.Run() // yield returns false; seq runs to its end
	}
	p.busy.Store(false)
}

// Coroutine is a typed asymmetric coroutine, the AsymCoroutine of Stadler
// et al., "Efficient Coroutines for the Java Platform": Resume passes a
// value in and runs the body until it yields a value out or returns one.
//
// The first Resume's argument is the body's in parameter; each later
// Resume's argument is what the body's yield call returns; the value the
// body returns is what the last Resume returns, after which IsDone reports
// true.
type Coroutine[In, Out any] struct {
	// c is in the Coroutine's allocation. The body refers only to x, so a
	// dropped Coroutine makes c unreachable, and it is reclaimed.
	c Continuation
	x *exchange[In, Out]
}

type exchange[In, Out any] struct {
	s   scope.Scope // in the exchange's allocation
	in  In
	out Out
	// busy is held by a Resume from before it hands in over until after
	// it has taken out back (see puller.busy).
	busy atomic.Bool
}

func (x *exchange[In, Out]) takeIn() In {
	in := x.in
	var zero In
	x.in = zero
	return in
}

// NewCoroutine returns a coroutine that runs body. Inside body, yield(out)
// suspends the coroutine, makes the pending Resume return out, and returns
// the argument of the next Resume. yield must be called on the goroutine
// running body; it panics with an error wrapping ErrNotInScope otherwise.
func NewCoroutine[In, Out any](body func(in In, yield func(Out) In) Out) *Coroutine[In, Out] {
	if body == nil {
		panic("continuation.NewCoroutine: nil body")
	}
	x := new(exchange[In, Out])
	x.s.Init("continuation.Coroutine")
	yield := func(out Out) In {
		mustBeIn(&x.s)
		x.out = out
		Yield(&x.s)
		return x.takeIn()
	}
	co := &Coroutine[In, Out]{x: x}
	co.c.init(&x.s, func() {
		x.out = body(x.takeIn(), yield)
	})
	return co
}

// Resume passes in to the coroutine and runs it until it yields or
// returns, and returns the value it yielded or returned. A panic in the
// body propagates from Resume. Resume panics with an error wrapping ErrDone
// if the coroutine has finished, and ErrMounted if it is running (a Resume
// from inside the body, or from another goroutine during one).
func (co *Coroutine[In, Out]) Resume(in In) Out {
	if co.c.IsDone() {
		co.c.Run() // panics with ErrDone; in is not kept
	}
	if !co.x.busy.CompareAndSwap(false, true) {
		busyPanic("continuation.Coroutine", "Resume called while another Resume runs the body")
	}
	// No defer: a Resume through which the body panics leaves the
	// coroutine done, and the next Resume panics with ErrDone before it
	// looks at busy.
	co.x.in = in
	co.c.Run()
	out := co.x.out
	var zero Out
	co.x.out = zero
	co.x.busy.Store(false)
	return out
}

// IsDone reports whether the body has returned (or panicked). After the
// Resume that returned the body's result, IsDone is true.
func (co *Coroutine[In, Out]) IsDone() bool { return co.c.IsDone() }

// Continuation returns the continuation the coroutine runs on, for its
// StackTrace and Stats.
func (co *Coroutine[In, Out]) Continuation() *Continuation { return &co.c }
