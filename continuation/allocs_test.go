//go:build !wasm

package continuation_test

import (
	"iter"
	"testing"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// A suspended continuation, generator or coroutine resumed and suspended
// again allocates nothing, on either backend: a yield loop is free of
// garbage, as iter.Pull's is. That holds where arch.HasG is true, on every
// architecture but wasm: there the engine finds the calling goroutine by
// parsing runtime.Stack, which allocates (arch/g_other.go), so these tests
// are not built.

// stepAllocs is testing.AllocsPerRun of step, which resumes something
// suspended once.
func stepAllocs(step func()) float64 {
	return testing.AllocsPerRun(1000, step)
}

func TestRoundTripAllocatesNothing(t *testing.T) {
	s := scope.New("allocs")
	stop := false
	c := continuation.New(s, func() {
		for !stop {
			continuation.Yield(s)
		}
	})
	c.Run()
	if n := stepAllocs(c.Run); n != 0 {
		t.Errorf("a round trip allocated %v objects, want 0", n)
	}
	stop = true
	c.Run()
	if !c.IsDone() {
		t.Fatal("the body did not finish")
	}
}

func TestPullNextAllocatesNothing(t *testing.T) {
	next, stop := continuation.Pull(func(yield func(int) bool) {
		for i := 0; yield(i); i++ {
		}
	})
	defer stop()
	want := 0
	if n := stepAllocs(func() {
		if v, ok := next(); !ok || v != want {
			t.Fatalf("next() = %d, %v, want %d, true", v, ok, want)
		}
		want++
	}); n != 0 {
		t.Errorf("Pull's next allocated %v objects, want 0", n)
	}
}

func TestPull2NextAllocatesNothing(t *testing.T) {
	next, stop := continuation.Pull2(func(yield func(int, string) bool) {
		for i := 0; yield(i, "v"); i++ {
		}
	})
	defer stop()
	want := 0
	if n := stepAllocs(func() {
		if k, v, ok := next(); !ok || k != want || v != "v" {
			t.Fatalf("next() = %d, %q, %v, want %d, \"v\", true", k, v, ok, want)
		}
		want++
	}); n != 0 {
		t.Errorf("Pull2's next allocated %v objects, want 0", n)
	}
}

func TestCoroutineResumeAllocatesNothing(t *testing.T) {
	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		for in >= 0 {
			in = yield(in * 2)
		}
		return in
	})
	co.Resume(0)
	i := 1
	if n := stepAllocs(func() {
		if got := co.Resume(i); got != 2*i {
			t.Fatalf("Resume(%d) = %d, want %d", i, got, 2*i)
		}
		i++
	}); n != 0 {
		t.Errorf("Resume allocated %v objects, want 0", n)
	}
	if got := co.Resume(-1); got != -1 || !co.IsDone() {
		t.Fatalf("Resume(-1) = %d, done %v; want -1, true", got, co.IsDone())
	}
}

// pullLifeAllocs bounds the objects a Pull's whole life allocates on the
// stack-copying backend: creating it, taking one value and stopping it.
// They are the Pull's own (its state, handle, next, stop, its sequence's
// yield and the body that calls it) and the engine's (the record and,
// at the first yield, the frozen frames and their pointers). iter.Pull's
// life takes 6 (TestPullLifeAllocations logs it).
const pullLifeAllocs = 9

// TestPullLifeAllocations: a short-lived generator allocates no more than
// pullLifeAllocs objects in its life.
func TestPullLifeAllocations(t *testing.T) {
	seq := func(yield func(int) bool) {
		for i := 0; yield(i); i++ {
		}
	}
	life := func(pull func(iter.Seq[int]) (func() (int, bool), func())) func() {
		return func() {
			next, stop := pull(seq)
			if v, ok := next(); !ok || v != 0 {
				t.Fatalf("next() = %d, %v, want 0, true", v, ok)
			}
			stop()
		}
	}
	ours := testing.AllocsPerRun(1000, life(continuation.Pull[int]))
	theirs := testing.AllocsPerRun(1000, life(iter.Pull[int]))
	t.Logf("a Pull's life allocates %v objects, iter.Pull's %v", ours, theirs)
	if weft.ActiveBackend() != weft.StackCopying {
		return // the portable backend's Pull is an iter.Pull and more
	}
	if ours > pullLifeAllocs {
		t.Errorf("a Pull's life allocated %v objects, want at most %d (iter.Pull's: %v)", ours, pullLifeAllocs, theirs)
	}
}
