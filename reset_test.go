package weft_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// runToEnd runs c until its body ends, and returns how many Runs it took.
func runToEnd(t *testing.T, c *weft.Cont) int {
	t.Helper()
	for n := 1; ; n++ {
		c.Run(nil)
		if c.IsDone() {
			return n
		}
		if n > 1000 {
			t.Fatal("the body did not end")
		}
	}
}

// resetToPanic resets c to a body that yields once and then panics, and
// runs it to the panic, which it checks.
func resetToPanic(t *testing.T, c *weft.Cont, s *scope.Scope) {
	t.Helper()
	c.Reset(s, func() { weft.Yield(s); panic("boom") })
	c.Run(nil)
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want boom", r)
		}
	}()
	c.Run(nil)
}

// resetPanic returns what Reset panicked with, or nil.
func resetPanic(c *weft.Cont, s *scope.Scope, body func()) (r any) {
	defer func() { r = recover() }()
	c.Reset(s, body)
	return nil
}

// TestReset reuses one record for bodies that end every way a body can
// end, each freezing heap and stack pointers of its own, and checks that
// nothing of an earlier body leaks into a later one.
func TestReset(t *testing.T) {
	s := scope.New("reset")
	c := weft.NewCont(s, func() {})
	var trace []string
	// body yields n times with its own locals live across the yields.
	body := func(id, n int) func() {
		return func() {
			local := [4]int{id, id, id, id}
			p := &local[2]
			h := &struct{ v []int }{v: []int{id}}
			for i := range n {
				if _, perr := weft.Yield(s); perr != nil {
					panic(perr)
				}
				runtime.GC()
				*p += i
				h.v = append(h.v, i)
			}
			trace = append(trace, fmt.Sprint(id, local, h.v))
		}
	}
	for round := range 6 {
		id := round + 1
		if round > 0 {
			c.Reset(s, body(id, id))
		} else {
			c = weft.NewCont(s, body(id, id))
		}
		if st := c.Stats(); st != (weft.Stats{}) {
			t.Fatalf("round %d: a reset continuation's counters are %+v, want zero", round, st)
		}
		if runs := runToEnd(t, c); runs != id+1 {
			t.Fatalf("round %d: %d runs, want %d", round, runs, id+1)
		}
		if st := c.Stats(); st.Runs != uint64(id+1) || st.Yields != uint64(id) {
			t.Fatalf("round %d: counters %+v, want %d runs and %d yields", round, st, id+1, id)
		}
		runtime.GC()
	}
	want := []string{
		"1 [1 1 1 1] [1 0]",
		"2 [2 2 3 2] [2 0 1]",
		"3 [3 3 6 3] [3 0 1 2]",
		"4 [4 4 10 4] [4 0 1 2 3]",
		"5 [5 5 15 5] [5 0 1 2 3 4]",
		"6 [6 6 21 6] [6 0 1 2 3 4 5]",
	}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace %q, want %q", trace, want)
	}

	// A body that panicked, and one that called runtime.Goexit, leave a
	// record that can be reset too.
	resetToPanic(t, c, s)
	c.Reset(s, func() { weft.Yield(s); runtime.Goexit() })
	c.Run(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(nil)
	}()
	<-done
	ran := false
	c.Reset(s, func() { ran = true })
	if runToEnd(t, c); !ran {
		t.Fatal("the body after a Goexit did not run")
	}
}

// TestResetStartsAfresh: Reset starts everything but the kept arrays
// afresh: the scope, the state, the owner and the pinned handler of the
// record's previous life are gone, and a pinned yield of the new body runs
// no handler of the old one.
func TestResetStartsAfresh(t *testing.T) {
	s1, s2 := scope.New("afresh-1"), scope.New("afresh-2")
	handled := 0
	c := weft.NewCont(s1, func() {
		weft.Yield(s1)
		pinning.Do(func() { weft.Yield(s1) }) // pinned: the handler runs
	})
	c.SetHandler(&weft.Handler{Pinned: func(*weft.Cont, *pinning.Error) { handled++ }})
	c.Run("first owner")
	c.Run("first owner")
	if !c.IsDone() || handled != 1 {
		t.Fatalf("first body: done %v, handler ran %d times; want true, 1", c.IsDone(), handled)
	}
	var perr *pinning.Error
	var owner any
	c.Reset(s2, func() {
		owner = weft.Current(s2).Owner()
		pinning.Do(func() { _, perr = weft.Yield(s2) })
		runtime.GC()
		weft.Yield(s2)
	})
	if c.Scope() != s2 || c.IsDone() || c.Owner() != nil || c.Stats() != (weft.Stats{}) {
		t.Fatalf("after Reset: scope %v, done %v, owner %v, stats %+v; want %v, false, nil, zero",
			c.Scope(), c.IsDone(), c.Owner(), c.Stats(), s2)
	}
	c.Run(nil)
	if c.IsDone() || owner != nil || perr == nil || handled != 1 {
		t.Fatalf("second body: done %v, owner %v, pinned error %v, handler ran %d times; want false, nil, an error, 1",
			c.IsDone(), owner, perr, handled)
	}
	runtime.GC()
	if runs := runToEnd(t, c); runs != 1 {
		t.Fatalf("%d more runs to the end, want 1", runs)
	}
}

// TestResetMisuse checks that Reset refuses a record whose body has not
// ended, and nil arguments, and leaves the record usable.
func TestResetMisuse(t *testing.T) {
	s := scope.New("reset-misuse")
	other := func() {}
	steps := 0
	c := weft.NewCont(s, func() {
		steps++
		weft.Yield(s)
		steps++
	})
	if r := resetPanic(c, s, other); !isNotDone(r) {
		t.Fatalf("Reset of a new continuation panicked with %v, want ErrNotDone", r)
	}
	c.Run(nil)
	if r := resetPanic(c, s, other); !isNotDone(r) {
		t.Fatalf("Reset of a suspended continuation panicked with %v, want ErrNotDone", r)
	}
	c.Run(nil)
	if !c.IsDone() || steps != 2 {
		t.Fatalf("the refused Resets changed the continuation: done %v after %d steps", c.IsDone(), steps)
	}
	c.Reset(s, func() {
		if r := resetPanic(weft.Current(s), s, other); !isNotDone(r) {
			t.Errorf("Reset of a running continuation panicked with %v, want ErrNotDone", r)
		}
	})
	runToEnd(t, c)
	if r := resetPanic(c, nil, other); r == nil {
		t.Error("Reset with a nil scope did not panic")
	}
	if r := resetPanic(c, s, nil); r == nil {
		t.Error("Reset with a nil body did not panic")
	}
}

func isNotDone(r any) bool {
	err, ok := r.(error)
	return ok && errors.Is(err, weft.ErrNotDone)
}

// TestUncountedCont runs a record made by NewUncountedCont, which has no
// counters, through yields, a nested continuation, a panic and Resets: it
// behaves as a counted one does, its Stats stay zero, and it stays
// uncounted across Reset, while a counted record nested in it counts.
func TestUncountedCont(t *testing.T) {
	s, inner := scope.New("uncounted"), scope.New("uncounted-inner")
	sum := 0
	body := func(n int) func() {
		return func() {
			for i := range n {
				if _, perr := weft.Yield(s); perr != nil {
					panic(perr)
				}
				runtime.GC()
				sum += i
			}
		}
	}
	c := weft.NewUncountedCont(s, body(5))
	if runs := runToEnd(t, c); runs != 6 || sum != 10 {
		t.Fatalf("%d runs and sum %d, want 6 and 10", runs, sum)
	}
	if st := c.Stats(); st != (weft.Stats{}) {
		t.Fatalf("an uncounted continuation's counters are %+v, want zero", st)
	}

	// Nested: the counted child yields to the uncounted parent's scope.
	var child *weft.Cont
	c.Reset(s, func() {
		child = weft.NewCont(inner, func() {
			for range 3 {
				weft.Yield(s)
			}
		})
		for !child.IsDone() {
			child.Run(nil)
		}
	})
	if runs := runToEnd(t, c); runs != 4 {
		t.Fatalf("%d runs of the parent, want 4", runs)
	}
	if st := c.Stats(); st != (weft.Stats{}) {
		t.Fatalf("a reset uncounted continuation's counters are %+v, want zero", st)
	}
	if st := child.Stats(); st.Runs != 1 || st.Yields != 3 {
		t.Fatalf("the counted child's counters are %+v, want 1 run and 3 yields", st)
	}

	resetToPanic(t, c, s)
	if st := c.Stats(); st != (weft.Stats{}) {
		t.Fatalf("counters %+v after a panic, want zero", st)
	}
	if r := func() (r any) {
		defer func() { r = recover() }()
		weft.NewUncountedCont(nil, func() {})
		return nil
	}(); r == nil {
		t.Fatal("NewUncountedCont accepted a nil scope")
	}
}

// Innermost is the continuation whose body is running, of any scope: nil
// outside any, the nested one inside a nested Run, the outer one again once
// that Run has returned, on either side of a yield.
func TestInnermost(t *testing.T) {
	if c := weft.Innermost(); c != nil {
		t.Fatalf("Innermost outside any continuation = %v, want nil", c)
	}
	a, b := scope.New("innermost-a"), scope.New("innermost-b")
	var outer, inner *weft.Cont
	var seen []*weft.Cont
	outer = weft.NewCont(a, func() {
		seen = append(seen, weft.Innermost())
		inner = weft.NewCont(b, func() {
			seen = append(seen, weft.Innermost())
			weft.Yield(b)
			seen = append(seen, weft.Innermost())
		})
		inner.Run(nil)
		seen = append(seen, weft.Innermost())
		weft.Yield(a)
		inner.Run(nil)
		seen = append(seen, weft.Innermost())
	})
	outer.Run(nil)
	runtime.GC()
	outer.Run(nil)
	if want := []*weft.Cont{outer, inner, outer, inner, outer}; !slices.Equal(seen, want) {
		t.Fatalf("Innermost at each step: %p, want %p", seen, want)
	}
	if c := weft.Innermost(); c != nil {
		t.Fatalf("Innermost after the body ended = %v, want nil", c)
	}
}
