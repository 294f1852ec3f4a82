package continuation_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// A continuation's body has pprof labels of its own, on both backends, as
// a goroutine has: it starts with those of the goroutine that created it
// (New, Pull, NewCoroutine), as a go statement's goroutine and iter.Pull's
// body do; labels it sets stay with it across yields whoever resumes it;
// and a goroutine that called Run has its own labels back when Run
// returns, whether the body yielded, returned, panicked or exited. On the
// portable backend the body is a goroutine, which starts with them; on the
// stack-copying one the body runs on the caller's goroutine, and before
// the engine swapped labels at each mount and unmount, a body that set
// labels and yielded left them on its caller, and a body resumed
// elsewhere ran under that goroutine's labels.

// profLabel returns the calling goroutine's profiler labels, as
// runtime/pprof reads them.
//
//go:linkname profLabel runtime/pprof.runtime_getProfLabel
func profLabel() unsafe.Pointer

// labelsOf formats labels that profLabel returned (runtime/pprof's
// labelMap: a sorted slice of key-value pairs).
func labelsOf(l unsafe.Pointer) string {
	if l == nil {
		return "none"
	}
	type label struct{ key, value string }
	return fmt.Sprint(*(*[]label)(l))
}

// setLabels gives the calling goroutine the labels kv (none if empty) and
// returns them as profLabel reports them.
func setLabels(kv ...string) unsafe.Pointer {
	ctx := context.Background()
	if len(kv) > 0 {
		ctx = pprof.WithLabels(ctx, pprof.Labels(kv...))
	}
	pprof.SetGoroutineLabels(ctx)
	return profLabel()
}

// labelChecker collects failures from bodies and goroutines; a body runs
// on whichever goroutine resumed it, and Run orders its accesses.
type labelChecker struct {
	t  *testing.T
	mu sync.Mutex
}

func (lc *labelChecker) want(what string, want unsafe.Pointer) {
	lc.t.Helper()
	if got := profLabel(); got != want {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		lc.t.Errorf("%s: labels %s, want %s", what, labelsOf(got), labelsOf(want))
	}
}

// onGoroutine runs f on a new goroutine that has the labels kv, checks
// that it still has them after f, and waits for it.
func (lc *labelChecker) onGoroutine(what string, f func(), kv ...string) {
	lc.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		mine := setLabels(kv...)
		f()
		lc.want(what+": the goroutine after Run", mine)
	}()
	<-done
}

// TestLabelsFollowContinuation: the body inherits the labels of the
// goroutine that creates and first runs it, keeps what it sets with pprof.Do across
// yields and resumes on goroutines with other labels or none (with the
// collector run and the stack grown between them), and pprof.Do ends by
// putting the body's context's labels back on the body, not on whichever
// goroutine resumed it; every goroutine keeps its own throughout.
func TestLabelsFollowContinuation(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	lc := &labelChecker{t: t}
	s := scope.New(t.Name())
	first := setLabels("who", "first runner")
	const rounds = 8
	c := continuation.New(s, func() {
		lc.want("the body at its start (the first runner's)", first)
		pprof.Do(context.Background(), pprof.Labels("req", "body"), func(context.Context) {
			own := profLabel()
			for r := range rounds {
				continuation.Yield(s)
				lc.want(fmt.Sprintf("the body in pprof.Do after yield %d", r), own)
				if r%2 == 0 {
					runtime.GC()
					pinGrowStack(16 << 10)
				}
			}
		})
		lc.want("the body after pprof.Do (its context's: none)", nil)
		continuation.Yield(s)
		lc.want("the body after its last yield", nil)
	})
	c.Run()
	lc.want("the first runner after Run", first)
	for r := 0; !c.IsDone(); r++ {
		var kv []string
		if r%3 != 2 {
			kv = []string{"who", fmt.Sprintf("runner %d", r)}
		}
		lc.onGoroutine(fmt.Sprintf("resume %d", r), c.Run, kv...)
	}
	lc.want("the first runner at the end", first)
}

// TestLabelsUnlabelledBody: a body that never sets labels runs under those
// of the goroutine that created it, wherever it runs, the first time
// included; one created by a goroutine without labels has none, even when
// run by goroutines that have some, and one created with labels keeps
// them when run by goroutines that have none.
func TestLabelsUnlabelledBody(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	lc := &labelChecker{t: t}
	for _, makerKV := range [][]string{nil, {"who", "maker"}} {
		s := scope.New(t.Name())
		maker := setLabels(makerKV...)
		c := continuation.New(s, func() {
			for r := range 4 {
				lc.want(fmt.Sprintf("the body (created under %s) before yield %d", labelsOf(maker), r), maker)
				continuation.Yield(s)
			}
		})
		var runnerKV []string
		if makerKV == nil {
			runnerKV = []string{"who", "runner"}
		}
		for !c.IsDone() {
			lc.onGoroutine("a runner", c.Run, runnerKV...)
		}
		lc.want("the maker", maker)
	}
}

// TestLabelsBodyPanicsOrExits: a body that set labels and yielded, resumed
// by a goroutine with labels of its own, ends by a panic or by
// runtime.Goexit: its deferred calls run under its labels, and the
// resuming goroutine's deferred calls, and its code after a recover,
// under the goroutine's own.
func TestLabelsBodyPanicsOrExits(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	for _, end := range []string{"panic", "Goexit"} {
		t.Run(end, func(t *testing.T) {
			lc := &labelChecker{t: t}
			s := scope.New(t.Name())
			setLabels()
			var own unsafe.Pointer
			c := continuation.New(s, func() {
				own = setLabels("req", "body")
				defer func() { lc.want("the body's deferred call", own) }()
				continuation.Yield(s)
				if end == "panic" {
					panic("body ends")
				}
				runtime.Goexit()
			})
			c.Run()
			lc.want("the first runner", nil)
			done := make(chan struct{})
			go func() {
				defer close(done)
				mine := setLabels("who", "resumer")
				defer func() {
					if end == "panic" && recover() == nil {
						t.Error("the body's panic did not reach Run's caller")
					}
					lc.want("the resumer's deferred call", mine)
				}()
				c.Run()
				t.Errorf("Run returned after the body's %s", end)
			}()
			<-done
			if !c.IsDone() {
				t.Errorf("the continuation is not done after its body's %s", end)
			}
		})
	}
}

// TestLabelsNestedYieldToOuter: an inner continuation's body, with labels
// of its own inside an outer one's with others, yields to the outer
// scope, suspending both. Each goroutine that resumes the outer one keeps
// its labels; each body finds its own when it resumes, and the outer body
// its own when the inner one yields only to it.
func TestLabelsNestedYieldToOuter(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	lc := &labelChecker{t: t}
	so, si := scope.New(t.Name()+" outer"), scope.New(t.Name()+" inner")
	first := setLabels("who", "first")
	var outerOwn, innerOwn unsafe.Pointer
	outer := continuation.New(so, func() {
		outerOwn = setLabels("req", "outer")
		inner := continuation.New(si, func() {
			lc.want("the inner body at its start (the outer body's)", outerOwn)
			innerOwn = setLabels("req", "inner")
			for r := range 3 {
				continuation.Yield(so) // both suspend
				lc.want(fmt.Sprintf("the inner body after yield %d to the outer scope", r), innerOwn)
				continuation.Yield(si) // the inner one only
				lc.want(fmt.Sprintf("the inner body after yield %d to its own scope", r), innerOwn)
			}
		})
		for !inner.IsDone() {
			inner.Run()
			lc.want("the outer body after the inner one's Run", outerOwn)
		}
	})
	outer.Run()
	lc.want("the first runner", first)
	for r := 0; !outer.IsDone(); r++ {
		lc.onGoroutine(fmt.Sprintf("resume %d", r), outer.Run, "who", fmt.Sprint("runner ", r))
	}
}

// TestLabelsPull: a generator's body with labels of its own leaves the
// consumer's alone at every value, and its deferred calls run under its
// labels when the consumer stops early.
func TestLabelsPull(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	lc := &labelChecker{t: t}
	consumer := setLabels("who", "consumer")
	var own unsafe.Pointer
	deferred := false
	next, stop := continuation.Pull(func(yield func(int) bool) {
		pprof.Do(context.Background(), pprof.Labels("gen", "numbers"), func(context.Context) {
			own = profLabel()
			defer func() {
				deferred = true
				lc.want("the generator's deferred call on stop", own)
			}()
			for i := 0; ; i++ {
				if !yield(i) {
					return
				}
				lc.want(fmt.Sprintf("the generator after value %d", i), own)
			}
		})
	})
	for i := range 5 {
		if v, ok := next(); !ok || v != i {
			t.Fatalf("next() = %d, %v; want %d, true", v, ok, i)
		}
		lc.want(fmt.Sprintf("the consumer after value %d", i), consumer)
	}
	stop()
	lc.want("the consumer after stop", consumer)
	if !deferred {
		t.Error("the generator's deferred call did not run on stop")
	}
}
