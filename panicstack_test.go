package weft

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/weftrt/weft/scope"
)

// panicStackCont is the continuation panicStackOuter's deferred call
// asks for PanicStack.
var panicStackCont *Cont

// panicStackOuter recovers the panic that ends the calls under it and
// returns the stack trace a deferred call can have of it: PanicStack's,
// or its own where PanicStack has none. Its frame and mid1's stay frozen
// under the return barrier once the yields have cut the region into
// records (the innermost one is panicStackLoop and mid2: the thaw
// policy's two frames), so the panic crosses the barrier with this
// deferred call pending.
//
//go:noinline
func panicStackOuter(s *scope.Scope, rounds int) (stack []byte, fromEngine bool) {
	defer func() {
		r := recover()
		if stack = panicStackCont.PanicStack(r); stack != nil {
			fromEngine = true
			return
		}
		buf := make([]byte, 64<<10)
		stack = buf[:runtime.Stack(buf, false)]
	}()
	panicStackMid1(s, rounds)
	return nil, false
}

//go:noinline
func panicStackMid1(s *scope.Scope, rounds int) { panicStackMid2(s, rounds) }

//go:noinline
func panicStackMid2(s *scope.Scope, rounds int) { panicStackLoop(s, rounds) }

//go:noinline
func panicStackLoop(s *scope.Scope, rounds int) {
	for range rounds {
		if _, perr := Yield(s); perr != nil {
			panic(perr)
		}
	}
	panicStackRaise(rounds)
}

//go:noinline
func panicStackRaise(v int) { panic(v) }

// A panic that crosses the return barrier while a frozen frame has a
// deferred call pending is raised again in that frame, whose deferred
// call would see a stack without the frames where it began: PanicStack
// gives it the stack where the panic reached the barrier, which names
// them. Without frozen frames (no yield yet, a single one, which thaws
// the whole region, or eager thaw) the deferred call's own stack has
// them, and PanicStack returns nil.
func TestPanicStack(t *testing.T) {
	lazy := useStackCopy && !eagerThaw
	for rounds := range 4 {
		s := scope.New("panicstack")
		var stack []byte
		var fromEngine bool
		c := NewCont(s, func() { stack, fromEngine = panicStackOuter(s, rounds) })
		panicStackCont = c
		for !c.IsDone() {
			c.Run(nil)
		}
		panicStackCont = nil
		if !bytes.Contains(stack, []byte("weft.panicStackRaise(")) {
			t.Errorf("after %d yields the stack a deferred call has does not name the function that panicked:\n%s", rounds, stack)
		}
		if want := lazy && rounds >= 2; fromEngine != want {
			t.Errorf("after %d yields PanicStack gave a stack: %v, want %v (backend: %s)", rounds, fromEngine, want, Backend())
		}
	}
	// A value that did not cross the barrier has no stack.
	if got := NewCont(scope.New("none"), func() {}).PanicStack(1); got != nil {
		t.Errorf("PanicStack of a continuation no panic crossed = %q, want nil", got)
	}
}

// twiceOuter recovers the panic under it, which crosses the return
// barrier twice: once into twiceDefer's frame, whose deferred call does
// not recover it, and, raised again from there, once more into this
// frame, eight frames further down and so in another record.
//
//go:noinline
func twiceOuter(s *scope.Scope) (stack []byte) {
	defer func() { stack = panicStackCont.PanicStack(recover()) }()
	twicePad(s, 8)
	return nil
}

//go:noinline
func twicePad(s *scope.Scope, n int) {
	if n == 0 {
		twiceDefer(s)
		return
	}
	twicePad(s, n-1)
}

//go:noinline
func twiceDefer(s *scope.Scope) {
	defer func() {}()
	panicStackMid2(s, 3)
}

// staleOuter recovers a panic that crossed the barrier, then raises
// another with the same interface words (a small int boxes to a static
// word) from frames that have not yielded, and returns the stack
// PanicStack gives its deferred call for the second.
//
//go:noinline
func staleOuter(s *scope.Scope) (stack []byte) {
	defer func() { stack = panicStackCont.PanicStack(recover()) }()
	staleRecover(s)
	staleRaiseAgain(3)
	return nil
}

//go:noinline
func staleRecover(s *scope.Scope) {
	defer func() { recover() }()
	panicStackMid1(s, 3) // panics with 3 after three yields
}

//go:noinline
func staleRaiseAgain(v int) { panic(v) }

// PanicStack names where the panic began when it crosses the barrier a
// second time, and never gives a panic raised by ordinary code the stack
// of an earlier one that crossed.
func TestPanicStackTwiceAndStale(t *testing.T) {
	if !useStackCopy || eagerThaw {
		t.Skip("no frames stay frozen: " + Backend())
	}
	run := func(body func(s *scope.Scope) []byte) ([]byte, Stats) {
		s := scope.New("panicstack")
		var stack []byte
		c := NewCont(s, func() { stack = body(s) })
		panicStackCont = c
		defer func() { panicStackCont = nil }()
		for !c.IsDone() {
			c.Run(nil)
		}
		return stack, c.Stats()
	}
	stack, st := run(twiceOuter)
	if st.Unwinds < 2 {
		t.Fatalf("the panic crossed the barrier %d times, want 2: the test tests nothing", st.Unwinds)
	}
	if !bytes.Contains(stack, []byte("weft.panicStackRaise(")) {
		t.Errorf("after two crossings PanicStack gave a stack without the function that panicked:\n%s", stack)
	}
	stack, st = run(staleOuter)
	if st.Unwinds < 1 {
		t.Fatalf("the first panic crossed the barrier %d times, want 1: the test tests nothing", st.Unwinds)
	}
	if stack != nil && !bytes.Contains(stack, []byte("weft.staleRaiseAgain(")) {
		t.Errorf("PanicStack gave the second panic the first one's stack:\n%s", stack)
	}
}
