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
