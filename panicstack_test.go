package weft

import (
	"bytes"
	"iter"
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
// deferred call pending is raised again in that frame. That deferred
// call's stack lacks the frames where the panic began. PanicStack gives it
// the stack where the panic reached the barrier, which names them.
// Without frozen frames the deferred call's own stack has them, and
// PanicStack returns nil. That is so before the first yield, after a
// single one (which thaws the whole region), and with eager thaw.
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

//go:noinline
func runRaise(v int) { panic(v) }

//go:noinline
func runYieldThenRaise(s *scope.Scope, yields, v int) {
	for range yields {
		if _, perr := Yield(s); perr != nil {
			panic(perr)
		}
	}
	runRaise(v)
}

// stackFor is what a deferred call that recovered r can know of where r
// began: PanicStack's trace if c has one (and whether it did), else its
// own stack.
func stackFor(c *Cont, r any) (stack []byte, fromEngine bool) {
	if stack = c.PanicStack(r); stack != nil {
		return stack, true
	}
	buf := make([]byte, 64<<10)
	return buf[:runtime.Stack(buf, false)], false
}

// A panic that ends a continuation's body reaches the goroutine that
// called Run, and a deferred call there that recovers it can learn where
// it began. On the stack-copying backend the body's frames were on that
// goroutine: its own stack names them, and PanicStack has nothing to add.
// On the portable backend the body ran on a goroutine of its own, and
// iter.Pull raised the panic again in Run: the stack is PanicStack's.
func TestPanicStackFromRun(t *testing.T) {
	for yields := range 3 {
		s := scope.New("fromrun")
		c := NewCont(s, func() { runYieldThenRaise(s, yields, 7) })
		var stack []byte
		var fromEngine bool
		func() {
			defer func() { stack, fromEngine = stackFor(c, recover()) }()
			for {
				c.Run(nil)
			}
		}()
		if !bytes.Contains(stack, []byte("weft.runRaise(")) {
			t.Errorf("after %d yields the stack the deferred call has does not name the function that panicked:\n%s", yields, stack)
		}
		if want := !useStackCopy; fromEngine != want {
			t.Errorf("after %d yields PanicStack gave a stack: %v, want %v (backend: %s)", yields, fromEngine, want, Backend())
		}
		// Not for another value, and not for a panic of ordinary code.
		if got := c.PanicStack(8); got != nil {
			t.Errorf("PanicStack(8) after a panic with 7 = %q, want nil", got)
		}
		func() {
			defer func() {
				if got := c.PanicStack(recover()); got != nil {
					t.Errorf("PanicStack for a panic raised by the caller itself, with the same value: %q, want nil", got)
				}
			}()
			runRaise(7)
		}()
	}
}

//go:noinline
func pullRaise(v int) { panic(v) }

// A panic that ends a nested continuation ends its parent's body too, if
// nothing recovers it: a deferred call in the parent's body that recovers
// it can learn where it began, on either backend. A later panic with the
// same value that iter.Pull raises again, for a sequence of the body's
// own, does not get its stack, before a yield or after. And a nested
// continuation's runtime.Goexit still ends the parent's body.
func TestPanicStackNestedCont(t *testing.T) {
	outer, inner := scope.New("outer"), scope.New("inner")
	var parent *Cont
	var inBody, ownPull, afterYield []byte
	parent = NewCont(outer, func() {
		func() {
			defer func() { inBody, _ = stackFor(parent, recover()) }()
			child := NewCont(inner, func() { runYieldThenRaise(inner, 2, 9) })
			for {
				child.Run(nil)
			}
		}()
		func() {
			defer func() { ownPull = parent.PanicStack(recover()) }()
			next, stop := iter.Pull(func(func(int) bool) { pullRaise(9) })
			defer stop()
			next()
		}()
		if _, perr := Yield(outer); perr != nil {
			panic(perr)
		}
		func() {
			defer func() { afterYield = parent.PanicStack(recover()) }()
			next, stop := iter.Pull(func(func(int) bool) { pullRaise(9) })
			defer stop()
			next()
		}()
		child := NewCont(inner, func() { runtime.Goexit() })
		child.Run(nil)
		t.Error("a nested continuation's runtime.Goexit did not end the parent's body")
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !parent.IsDone() {
			parent.Run(nil)
		}
	}()
	<-done
	if !bytes.Contains(inBody, []byte("weft.runRaise(")) {
		t.Errorf("the stack a deferred call in the parent's body has of the nested continuation's panic does not name the function that panicked:\n%s", inBody)
	}
	if ownPull != nil {
		t.Errorf("PanicStack gave a panic of the body's own iter.Pull the nested continuation's earlier stack:\n%s", ownPull)
	}
	if afterYield != nil {
		t.Errorf("PanicStack gave a panic of the caller's own iter.Pull, after a yield, an earlier panic's stack:\n%s", afterYield)
	}
	if !parent.IsDone() {
		t.Error("the parent did not end")
	}
}

// Through two levels of nesting: the middle continuation's body ends by
// the panic its child's Run raised again, and still hands on the stack
// where the panic began, not its own.
func TestPanicStackThreeDeep(t *testing.T) {
	s1, s2, s3 := scope.New("top"), scope.New("middle"), scope.New("bottom")
	var top *Cont
	var stack []byte
	top = NewCont(s1, func() {
		defer func() { stack, _ = stackFor(top, recover()) }()
		middle := NewCont(s2, func() {
			bottom := NewCont(s3, func() { runYieldThenRaise(s3, 1, 11) })
			for {
				bottom.Run(nil)
			}
		})
		middle.Run(nil)
	})
	top.Run(nil)
	if !top.IsDone() {
		t.Fatal("the top continuation did not end")
	}
	if !bytes.Contains(stack, []byte("weft.runRaise(")) {
		t.Errorf("the stack does not name the function that panicked:\n%s", stack)
	}
}

// goexitOuter is panicStackOuter for a panic raised by a deferred call
// during runtime.Goexit: its deferred call recovers it and takes a stack,
// and the Goexit then goes on, so its frame never returns.
//
//go:noinline
func goexitOuter(s *scope.Scope, rounds int, stack *[]byte, fromEngine *bool) {
	defer func() {
		r := recover()
		if *stack = panicStackCont.PanicStack(r); *stack != nil {
			*fromEngine = true
			return
		}
		buf := make([]byte, 64<<10)
		*stack = buf[:runtime.Stack(buf, false)]
	}()
	goexitMid(s, rounds)
	panic("goexitOuter returned: the Goexit did not go on")
}

//go:noinline
func goexitMid(s *scope.Scope, rounds int) { goexitLoop(s, rounds) }

//go:noinline
func goexitLoop(s *scope.Scope, rounds int) {
	defer goexitRaise(rounds)
	for range rounds {
		if _, perr := Yield(s); perr != nil {
			panic(perr)
		}
	}
	runtime.Goexit()
}

//go:noinline
func goexitRaise(v int) { panic(v) }

// A deferred call of runtime.Goexit raises a panic that crosses the
// barrier while a frozen frame's deferred call is pending. It is raised
// again there, from a Goexit of the thawed frames' own
// (frozenGoexitPanic). So the frame that recovers it goes on exiting.
// PanicStack still gives the stack where it was raised.
func TestPanicStackDuringGoexit(t *testing.T) {
	lazy := useStackCopy && !eagerThaw
	for rounds := range 4 {
		s := scope.New("panicstack-goexit")
		var stack []byte
		var fromEngine, bodyDeferred bool
		c := NewCont(s, func() {
			defer func() { bodyDeferred = true }()
			goexitOuter(s, rounds, &stack, &fromEngine)
		})
		panicStackCont = c
		for !c.IsDone() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.Run(nil)
			}()
			<-done
		}
		panicStackCont = nil
		if !bodyDeferred {
			t.Fatalf("after %d yields the body's deferred call did not run", rounds)
		}
		if !bytes.Contains(stack, []byte("weft.goexitRaise(")) {
			t.Errorf("after %d yields the stack a deferred call has does not name the function that panicked:\n%s", rounds, stack)
		}
		if want := lazy && rounds >= 2; fromEngine != want {
			t.Errorf("after %d yields PanicStack gave a stack: %v, want %v", rounds, fromEngine, want)
		}
	}
}
