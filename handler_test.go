package weft

import (
	"runtime"
	"testing"

	"github.com/weftrt/weft/scope"
)

// armings counts the Abandonable calls of the continuations it handles,
// and checks that each came with the owner Run was given.
type armings struct {
	t     *testing.T
	owner any
	n     int
}

func (a *armings) handler() *Handler {
	return &Handler{Abandonable: func(c *Cont, owner any) {
		if owner != a.owner {
			a.t.Errorf("Abandonable got owner %v, want %v", owner, a.owner)
		}
		if state(c.state.Load()) != stMounted {
			a.t.Errorf("Abandonable ran on a continuation in state %d, want it mounted", c.state.Load())
		}
		a.n++
	}}
}

// run runs c once and returns how many times Abandonable ran.
func (a *armings) run(c *Cont) int {
	before := a.n
	c.Run(a.owner)
	return a.n - before
}

//go:noinline
func armPlainYield(s *scope.Scope) { Yield(s) }

// armMaybeDefer yields with an open-coded deferred call pending if d. The
// call takes no arguments: a closure or arguments would make the frame
// hold stack objects, which keep capture templates away.
//
//go:noinline
func armMaybeDefer(s *scope.Scope, d bool) {
	if d {
		defer armDeferred()
	}
	Yield(s)
}

// armDeferredCalls counts the calls armMaybeDefer deferred that ran.
var armDeferredCalls int

//go:noinline
func armDeferred() { armDeferredCalls++ }

// armHeapDefers yields with n deferred calls pending, defer records on
// the heap: a defer in a loop is never open-coded.
//
//go:noinline
func armHeapDefers(s *scope.Scope, n int, ran *int) {
	for range n {
		defer func() { *ran++ }()
	}
	Yield(s)
}

// TestAbandonableOnlyWithDeferredCalls: on the stack-copying backend the
// handler runs once, at the first suspension with a frozen deferred call
// pending, however the frame was frozen; a body with none never needs
// Abandon. On the portable backend it runs at the first suspension.
func TestAbandonableOnlyWithDeferredCalls(t *testing.T) {
	cases := []struct {
		name string
		body func(s *scope.Scope, ran *int)
		// armAt is the suspension, from 1, whose Run arms the
		// continuation on the stack-copying backend; 0 for none.
		armAt int
	}{
		{"no deferred calls", func(s *scope.Scope, _ *int) {
			for range 4 {
				armPlainYield(s)
			}
		}, 0},
		{"deferred in the body", func(s *scope.Scope, ran *int) {
			defer func() { *ran++ }()
			for range 3 {
				armPlainYield(s)
			}
		}, 1},
		{"deferred after a yield", func(s *scope.Scope, ran *int) {
			armPlainYield(s)
			armPlainYield(s)
			armMaybeDefer(s, true)
			armPlainYield(s)
		}, 3},
		{"template capture", func(s *scope.Scope, ran *int) {
			// The same chain suspends without and then with a deferred
			// call pending; the second capture takes the first's template.
			for i := range 6 {
				armMaybeDefer(s, i >= 4)
			}
		}, 5},
		{"defer records", func(s *scope.Scope, ran *int) {
			armPlainYield(s)
			armHeapDefers(s, 3, ran)
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := scope.New("arm")
			ran := 0
			a := &armings{t: t, owner: "handle"}
			c := NewCont(s, func() { tc.body(s, &ran) })
			c.SetHandler(a.handler())
			templated := c.Stats().Templated
			for k := 1; ; k++ {
				n := a.run(c)
				if c.IsDone() {
					if n != 0 {
						t.Errorf("Abandonable ran as the body ended")
					}
					break
				}
				want := 0
				switch {
				case !useStackCopy && k == 1, useStackCopy && k == tc.armAt:
					want = 1
				}
				if n != want {
					t.Errorf("suspension %d: Abandonable ran %d times, want %d", k, n, want)
				}
				if tc.name == "template capture" && useStackCopy && k == tc.armAt && c.Stats().Templated == templated {
					t.Errorf("suspension %d: not captured by a template; the case tests nothing", k)
				}
				runtime.GC()
			}
			if want := min(tc.armAt, 1); useStackCopy && a.n != want || !useStackCopy && a.n != 1 {
				t.Errorf("Abandonable ran %d times in all", a.n)
			}
		})
	}
}

// TestAbandonableNested: a continuation suspended by a yield from inside
// a nested one is armed when only the nested one's frames have a
// deferred call pending, for unwinding it unwinds the nested one too.
func TestAbandonableNested(t *testing.T) {
	outerS, innerS := scope.New("outer"), scope.New("inner")
	ran := 0
	a := &armings{t: t, owner: "outer"}
	inner := NewCont(innerS, func() {
		defer func() { ran++ }()
		armPlainYield(outerS) // suspends outer with inner inside it
	})
	outer := NewCont(outerS, func() {
		armPlainYield(outerS)
		inner.Run(nil)
	})
	outer.SetHandler(a.handler())
	if n := a.run(outer); n != 1 && !useStackCopy || n != 0 && useStackCopy {
		t.Fatalf("first suspension, no deferred call pending: Abandonable ran %d times", n)
	}
	if n := a.run(outer); n != 0 && !useStackCopy || n != 1 && useStackCopy {
		t.Fatalf("suspended with the nested continuation's deferred call pending: Abandonable ran %d times, want 1", n)
	}
	if a.run(outer); !outer.IsDone() || !inner.IsDone() || ran != 1 {
		t.Fatalf("done %v, %v; deferred call ran %d times", outer.IsDone(), inner.IsDone(), ran)
	}
}

// TestAbandonableAfterReset: Reset starts the count afresh.
func TestAbandonableAfterReset(t *testing.T) {
	s := scope.New("arm-reset")
	ran := 0
	a := &armings{t: t, owner: "handle"}
	body := func() {
		defer func() { ran++ }()
		armPlainYield(s)
	}
	c := NewCont(s, body)
	for round := range 2 {
		c.SetHandler(a.handler()) // Reset clears it
		if n := a.run(c); n != 1 {
			t.Fatalf("round %d: Abandonable ran %d times at the first suspension, want 1", round, n)
		}
		if a.run(c); !c.IsDone() {
			t.Fatalf("round %d: not done", round)
		}
		c.Reset(s, body)
	}
	if ran != 2 {
		t.Fatalf("deferred call ran %d times, want 2", ran)
	}
}
