package continuation_test

// Misuse: every way of using the API wrongly panics with an error that
// wraps one of the sentinels, names the scope, and leaves the continuations
// involved usable where the contract says they are.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// mustPanicWith calls f, which must panic with an error wrapping sentinel,
// and returns that error.
func mustPanicWith(t testing.TB, sentinel error, f func()) error {
	t.Helper()
	p, panicked := recoverPanic(f)
	if !panicked {
		t.Fatalf("did not panic; want an error wrapping %q", sentinel)
	}
	err, ok := p.(error)
	if !ok || !errors.Is(err, sentinel) {
		t.Fatalf("panicked with %#v; want an error wrapping %q", p, sentinel)
	}
	return err
}

// panicsWith is mustPanicWith for bodies and other goroutines: it reports
// a mismatch as a string instead of stopping the test.
func panicsWith(sentinel error, f func()) (err error, problem string) {
	p, panicked := recoverPanic(f)
	if !panicked {
		return nil, fmt.Sprintf("did not panic; want an error wrapping %q", sentinel)
	}
	err, ok := p.(error)
	if !ok || !errors.Is(err, sentinel) {
		return nil, fmt.Sprintf("panicked with %#v; want an error wrapping %q", p, sentinel)
	}
	return err, ""
}

func mentions(t testing.TB, err error, name string) {
	t.Helper()
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not mention the scope name %q", err, name)
	}
}

func TestSentinelsDistinct(t *testing.T) {
	es := []error{continuation.ErrDone, continuation.ErrMounted, continuation.ErrNotInScope}
	for i, a := range es {
		if a == nil || a.Error() == "" {
			t.Fatalf("sentinel %d is nil or has no message", i)
		}
		for j, b := range es {
			if i != j && errors.Is(a, b) {
				t.Fatalf("%q matches %q", a, b)
			}
		}
	}
}

func TestRunDone(t *testing.T) {
	for _, yields := range []int{0, 2} {
		t.Run(fmt.Sprint("yields=", yields), func(t *testing.T) {
			s := scope.New("misuse-done-scope")
			c := continuation.New(s, func() {
				for i := 0; i < yields; i++ {
					continuation.Yield(s)
				}
			})
			if n := runToEnd(c, sameGoroutine, nil); n != yields {
				t.Fatalf("%d suspensions, want %d", n, yields)
			}
			for i := 0; i < 3; i++ { // and again: still done, still the same error
				err := mustPanicWith(t, continuation.ErrDone, c.Run)
				mentions(t, err, s.Name())
				if errors.Is(err, continuation.ErrMounted) || errors.Is(err, continuation.ErrNotInScope) {
					t.Fatalf("ErrDone error %q also matches another sentinel", err)
				}
			}
			if !c.IsDone() || c.Stats().Runs != uint64(yields+1) {
				t.Fatalf("done %v, Stats %+v: a failed Run must not count", c.IsDone(), c.Stats())
			}
		})
	}
}

func TestRunReentrant(t *testing.T) {
	s := scope.New("misuse-reentrant-scope")
	var c *continuation.Continuation
	var errs []error
	var problems []string
	c = continuation.New(s, func() {
		for i := 0; i < 2; i++ {
			err, problem := panicsWith(continuation.ErrMounted, c.Run)
			errs, problems = append(errs, err), append(problems, problem)
			continuation.Yield(s)
		}
	})
	if n := runToEnd(c, sameGoroutine, nil); n != 2 {
		t.Fatalf("%d suspensions, want 2: the re-entrant Run disturbed the body", n)
	}
	for i, p := range problems {
		if p != "" {
			t.Fatalf("re-entrant Run %d: %s", i, p)
		}
		mentions(t, errs[i], s.Name())
	}
}

// TestRunReentrantFromNested: an inner body calling Run on the outer
// continuation that runs it.
func TestRunReentrantFromNested(t *testing.T) {
	so, si := scope.New("misuse-outer-scope"), scope.New("misuse-inner-scope")
	var outer *continuation.Continuation
	var err error
	var problem string
	inner := continuation.New(si, func() {
		err, problem = panicsWith(continuation.ErrMounted, outer.Run)
	})
	outer = continuation.New(so, func() { inner.Run() })
	outer.Run()
	if problem != "" {
		t.Fatal(problem)
	}
	mentions(t, err, so.Name())
	if !outer.IsDone() || !inner.IsDone() {
		t.Fatal("not done")
	}
}

// TestRunConcurrent: of N goroutines calling Run on one suspended
// continuation at once, exactly one runs it and the others panic with
// ErrMounted. The winner's body holds the continuation mounted until every
// loser has been refused, so the outcome does not depend on timing.
func TestRunConcurrent(t *testing.T) {
	const goroutines = 8
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	s := scope.New("misuse-concurrent-scope")
	var (
		inBody  atomic.Int32 // bodies running now: never more than one
		lost    = make(chan error, goroutines)
		winners = make([]atomic.Int32, rounds+1)
		trail   []int // written only by the body
	)
	c := continuation.New(s, func() {
		local := [4]int{1, 2, 3, 4}
		for r := 0; r <= rounds; r++ {
			if n := inBody.Add(1); n != 1 {
				t.Errorf("round %d: %d bodies running at once", r, n)
			}
			winners[r].Add(1)
			for i := 0; i < goroutines-1; i++ {
				select {
				case <-lost:
				case <-time.After(time.Minute): // a hang guard, not a timing assertion
					t.Errorf("round %d: only %d of %d other Runs were refused", r, i, goroutines-1)
					inBody.Add(-1)
					return
				}
			}
			trail = append(trail, r)
			if local != [4]int{1, 2, 3, 4} || len(trail) != r+1 {
				t.Errorf("round %d: local state %v, trail %d", r, local, len(trail))
			}
			inBody.Add(-1)
			if r < rounds {
				continuation.Yield(s)
			}
		}
	})
	for r := 0; r <= rounds; r++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p, panicked := recoverPanic(c.Run)
				if !panicked {
					return // the winner
				}
				err, ok := p.(error)
				if !ok || !errors.Is(err, continuation.ErrMounted) {
					t.Errorf("round %d: losing Run panicked with %#v, want ErrMounted", r, p)
				} else if !strings.Contains(err.Error(), s.Name()) {
					t.Errorf("error %q does not mention the scope name", err)
				}
				lost <- err
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if n := winners[r].Load(); n != 1 {
			t.Fatalf("round %d: %d winners", r, n)
		}
		if (r == rounds) != c.IsDone() {
			t.Fatalf("round %d: IsDone %v", r, c.IsDone())
		}
	}
	if len(trail) != rounds+1 {
		t.Fatalf("trail %d, want %d", len(trail), rounds+1)
	}
	if st := c.Stats(); st.Runs != uint64(rounds+1) || st.Yields != uint64(rounds) {
		t.Fatalf("Stats %+v: refused Runs must not count", st)
	}
}

func TestRunInnerSuspendedInOuter(t *testing.T) {
	so, si := scope.New("misuse-outer-scope"), scope.New("misuse-inner-scope")
	inner := continuation.New(si, func() {
		continuation.Yield(so)
		continuation.Yield(so)
	})
	outer := continuation.New(so, func() { inner.Run() })
	outer.Run()
	for i := 0; i < 2; i++ {
		before := inner.Stats()
		err := mustPanicWith(t, continuation.ErrMounted, inner.Run)
		mentions(t, err, si.Name())
		if after := inner.Stats(); after != before {
			t.Fatalf("inner Stats %+v after a refused Run, %+v before: refused Runs must not count", after, before)
		}
		outer.Run()
	}
	if !outer.IsDone() || !inner.IsDone() {
		t.Fatal("the refused Runs disturbed the continuations")
	}
	if st := inner.Stats(); st.Yields != 2 {
		t.Fatalf("inner Stats %+v, want Yields 2", st)
	}
}

func TestYieldNilScope(t *testing.T) {
	mustPanicWith(t, continuation.ErrNotInScope, func() { continuation.Yield(nil) })
	// Also from inside a body, where a scope is mounted.
	s := scope.New("misuse-nil-yield-scope")
	var problem string
	c := continuation.New(s, func() {
		_, problem = panicsWith(continuation.ErrNotInScope, func() { continuation.Yield(nil) })
	})
	c.Run()
	if problem != "" {
		t.Fatal(problem)
	}
	if !c.IsDone() {
		t.Fatal("not done")
	}
}

func TestYieldNoContinuation(t *testing.T) {
	s := scope.New("misuse-nothing-mounted-scope")
	err := mustPanicWith(t, continuation.ErrNotInScope, func() { continuation.Yield(s) })
	mentions(t, err, s.Name())
	// A continuation of s that exists but is not mounted changes nothing.
	c := continuation.New(s, func() { continuation.Yield(s) })
	mustPanicWith(t, continuation.ErrNotInScope, func() { continuation.Yield(s) })
	c.Run()
	mustPanicWith(t, continuation.ErrNotInScope, func() { continuation.Yield(s) })
	c.Run()
	mustPanicWith(t, continuation.ErrNotInScope, func() { continuation.Yield(s) })
	if !c.IsDone() {
		t.Fatal("not done")
	}
}

func TestYieldScopeNotMounted(t *testing.T) {
	s, other := scope.New("misuse-mounted-scope"), scope.New("misuse-other-scope")
	var err error
	var problem string
	c := continuation.New(s, func() {
		err, problem = panicsWith(continuation.ErrNotInScope, func() { continuation.Yield(other) })
		continuation.Yield(s) // the body goes on normally
	})
	if n := runToEnd(c, sameGoroutine, nil); n != 1 {
		t.Fatalf("%d suspensions, want 1", n)
	}
	if problem != "" {
		t.Fatal(problem)
	}
	mentions(t, err, other.Name())
	if c.Stats().Yields != 1 {
		t.Fatalf("Stats %+v: the refused Yield must not count", c.Stats())
	}
}

// TestYieldFromOtherGoroutine: a goroutine started inside the body is not
// running the continuation, so it cannot yield it.
func TestYieldFromOtherGoroutine(t *testing.T) {
	s := scope.New("misuse-goroutine-scope")
	var (
		err        error
		problem    string
		current    *continuation.Continuation
		curProblem string
	)
	c := continuation.New(s, func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			err, problem = panicsWith(continuation.ErrNotInScope, func() { continuation.Yield(s) })
			current = continuation.Current(s)
			_, curProblem = panicsWith(continuation.ErrNotInScope, func() { continuation.Current(nil) })
		}()
		<-done
		continuation.Yield(s)
	})
	if n := runToEnd(c, sameGoroutine, nil); n != 1 {
		t.Fatalf("%d suspensions, want 1", n)
	}
	if problem != "" {
		t.Fatal(problem)
	}
	mentions(t, err, s.Name())
	if current != nil {
		t.Fatal("Current(s) on a goroutine started by the body is not nil")
	}
	if curProblem != "" {
		t.Fatal(curProblem)
	}
}

func TestCurrent(t *testing.T) {
	mustPanicWith(t, continuation.ErrNotInScope, func() { continuation.Current(nil) })
	s := scope.New("misuse-current-scope")
	if continuation.Current(s) != nil {
		t.Fatal("Current with nothing mounted is not nil")
	}
	var c *continuation.Continuation
	var inBody []*continuation.Continuation
	c = continuation.New(s, func() {
		inBody = append(inBody, continuation.Current(s), continuation.Current(scope.New("unrelated")))
		continuation.Yield(s)
		inBody = append(inBody, continuation.Current(s))
	})
	c.Run()
	if continuation.Current(s) != nil {
		t.Fatal("Current(s) is not nil after the continuation yielded")
	}
	newGoroutine(c)
	if len(inBody) != 3 || inBody[0] != c || inBody[1] != nil || inBody[2] != c {
		t.Fatalf("Current in the body: %v, want [c nil c]", inBody)
	}
	if continuation.Current(s) != nil {
		t.Fatal("Current(s) is not nil after the continuation finished")
	}
}

func TestNewNil(t *testing.T) {
	if _, panicked := recoverPanic(func() { continuation.New(nil, func() {}) }); !panicked {
		t.Fatal("New(nil, body) did not panic")
	}
	if _, panicked := recoverPanic(func() { continuation.New(scope.New("misuse-nil-body"), nil) }); !panicked {
		t.Fatal("New(s, nil) did not panic")
	}
}

// TestMisuseLeavesStateIntact: a refused Run or Yield inside a nested pair
// changes neither continuation.
func TestMisuseLeavesStateIntact(t *testing.T) {
	so, si := scope.New("misuse-outer-scope"), scope.New("misuse-inner-scope")
	var log []string
	var outer, inner *continuation.Continuation
	inner = continuation.New(si, func() {
		if _, p := panicsWith(continuation.ErrMounted, inner.Run); p != "" {
			t.Error(p)
		}
		if _, p := panicsWith(continuation.ErrMounted, outer.Run); p != "" {
			t.Error(p)
		}
		if _, p := panicsWith(continuation.ErrNotInScope, func() { continuation.Yield(scope.New("x")) }); p != "" {
			t.Error(p)
		}
		log = append(log, "inner 1")
		continuation.Yield(so)
		log = append(log, "inner 2")
	})
	outer = continuation.New(so, func() {
		inner.Run()
		log = append(log, "outer end")
	})
	outer.Run()
	mustPanicWith(t, continuation.ErrMounted, inner.Run)
	outer.Run()
	mustPanicWith(t, continuation.ErrDone, inner.Run)
	mustPanicWith(t, continuation.ErrDone, outer.Run)
	if want := []string{"inner 1", "inner 2", "outer end"}; strings.Join(log, ",") != strings.Join(want, ",") {
		t.Fatalf("log %q, want %q", log, want)
	}
}
