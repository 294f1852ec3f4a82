package weft

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// This file is the yield path shared by both backends. It finds the
// continuation a Yield names and decides whether it may be suspended. It
// suspends it with every continuation nested inside it. The stack-copying
// freeze is in freeze_amd64.go; the portable backend parks the body
// goroutine (portable.go).

// Yield suspends the innermost continuation of scope s mounted on the
// calling goroutine, and every continuation nested inside it, and returns
// when the continuation is resumed. It returns the continuation that was
// suspended and nil.
//
// If the yield is pinned, nothing is suspended: Yield returns the
// continuation and an error describing why, and the caller decides what to
// do (package continuation calls the onPinned handler).
//
// Yield panics with an error wrapping ErrNotInScope if s is nil or no
// continuation of s is mounted on the calling goroutine.
//
// Yield is never inlined: the capture leaves its frame out, and must find
// it (captureIn checks).
//
//go:noinline
func Yield(s *scope.Scope) (*Cont, *pinning.Error) {
	// The region starts at this frame's caller. A resume continues it as
	// if this call had returned, so no frame of the engine is frozen,
	// copied or returned through. The resume makes the results, in the
	// caller's frame (stackState.prepareThaw: thawYield, or yieldReturn).
	// leave returns only if nothing was suspended.
	g := rt.CurG()
	l := gls.CurrentG(unsafe.Pointer(g))
	if cur := contOf(l); useStackCopy && l != nil && cur.scope == s && l.PinCount() == 0 &&
		state(cur.state.Load()) != stCancelling && g.LockCount() == cur.local.Locks {
		// The usual yield on the stack-copying backend: to the innermost
		// continuation, mounted, not abandoned, outside any critical
		// section and with the thread's locking it was mounted with.
		cur.target = cur
		pe := cur.stack.leave(cur.stack.chunk.capture(enterPC, true, cur.counters()))
		return cur, cur.pinnedFrom(pe)
	}
	// Everything else: yieldChecks repeats those tests in their order.
	cur, t, perr, capture := yieldChecks(s, l)
	if !capture {
		return t, perr
	}
	cur.target = t
	pe := cur.stack.leave(cur.stack.chunk.capture(enterPC, true, cur.counters()))
	return t, t.pinnedFrom(pe)
}

// yieldChecks is Yield for every yield but the usual one. l is the
// calling goroutine's innermost continuation record, nil if none. With
// capture false, it has panicked, unwound, or made Yield's results; on the
// portable backend it has suspended. With capture true, Yield is to
// capture cur from its caller's frame, for a yield to t.
//
//go:noinline
func yieldChecks(s *scope.Scope, l *gls.Local) (cur, t *Cont, perr *pinning.Error, capture bool) {
	if s == nil {
		panic(nilScope("Yield"))
	}
	if l == nil {
		panic(notInScope(s))
	}
	cur = contOf(l)
	if state(cur.state.Load()) == stCancelling {
		// A deferred call is yielding while an abandoned continuation
		// unwinds; there is nobody to resume it.
		runtime.Goexit()
	}
	t = cur
	for t.scope != s {
		if t = t.parent(); t == nil {
			panic(notInScope(s))
		}
	}
	if t != cur && enclosingCancelled(cur, t) {
		// As above, for a continuation that a deferred call of an
		// abandoned one is running (nested in it), yielding to it.
		runtime.Goexit()
	}
	for x := cur; ; x = x.parent() {
		if pinned, pc := x.local.Pinned(); pinned {
			return cur, t, t.pinnedYield(pinning.CriticalSection, pc), false
		}
		if x == t {
			break
		}
	}
	if useStackCopy {
		if rt.CurLockCount() != t.local.Locks {
			return cur, t, t.pinnedYield(pinning.LockedThread, 0), false
		}
		return cur, t, nil, true
	}
	// A body goroutine that locked its thread (or unlocked it) since it
	// started cannot switch out: the runtime throws if a coroutine
	// switches with thread locking other than it began with. Every body
	// from cur's to t's switches out in a yield to t, all on this thread
	// (a coroutine switch keeps it), so each must have begun with the
	// locking it has now.
	for x, n := cur, rt.CurLockCount(); ; x = x.parent() {
		if n != x.local.Locks {
			return cur, t, t.pinnedYield(pinning.LockedThread, 0), false
		}
		if x == t {
			break
		}
	}
	if pe := portableLocked(cur, t); pe != nil {
		return cur, t, pe, false
	}
	if cur.suspend(t) {
		runtime.Goexit()
	}
	return cur, t, nil, false
}

// The functions below build errors off the hot path. Their frames do not
// enlarge Yield's.

// enclosingCancelled reports whether a continuation enclosing cur, up to
// t, is an abandoned one unwinding (stCancelling). A yield from cur to t
// would suspend it, and nobody can resume it. A deferred call of such a
// continuation that runs a nested one gets here. Yield then unwinds, on
// both backends. The stack-copying backend cannot freeze the unwinding
// frames: runtime.Goexit is a runtime frame.
//
//go:noinline
func enclosingCancelled(cur, t *Cont) bool {
	for x := cur.parent(); x != nil; x = x.parent() {
		if state(x.state.Load()) == stCancelling {
			return true
		}
		if x == t {
			break
		}
	}
	return false
}

// pinnedYield counts a pinned yield to t and describes it.
//
//go:noinline
func (t *Cont) pinnedYield(r pinning.Reason, pc uintptr) *pinning.Error {
	if n := t.counters(); n != nil {
		n.pinned.Add(1)
	}
	frame := gls.PinFrame(pc)
	if r == pinning.DeferRecord {
		// The function whose frame has the record, not one inlined into
		// it that was calling out at pc.
		frame = gls.OwnerFrame(pc)
	}
	perr := &pinning.Error{Reason: r, Scope: t.scope.Name(), Frame: frame}
	if h := t.handler; h != nil && h.Pinned != nil {
		h.Pinned(t, perr)
	}
	return perr
}

//go:noinline
func nilScope(op string) error {
	return fmt.Errorf("continuation.%s(nil): %w: the scope is nil", op, ErrNotInScope)
}

//go:noinline
func notInScope(s *scope.Scope) error {
	return fmt.Errorf("continuation.Yield(%v): %w (Yield must be called from the body of a running continuation of that scope, on the goroutine that runs it)", s, ErrNotInScope)
}
