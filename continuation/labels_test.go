package continuation_test

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// A continuation's body has pprof labels of its own, on both backends, as
// a goroutine has: it starts with those of the goroutine that created it
// (New, Pull, NewCoroutine), as a go statement's goroutine and iter.Pull's
// body do; labels it sets stay with it across yields whoever resumes it;
// and a goroutine that called Run has its own labels back when Run
// returns, whether the body yielded, returned, panicked or exited. On the
// portable backend the body is a goroutine, which starts with them; on the
// stack-copying one the body runs on the caller's goroutine, and the
// engine swaps labels at each mount and unmount, so that a body that sets
// labels and yields leaves its caller's as they were, and a body resumed
// elsewhere runs under its own labels, not that goroutine's.

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

// Labels on the rarer paths: a panic and a Goexit that cross the return
// barrier with frozen frames' deferred calls pending, a yield to an
// enclosing scope that the enclosing region refuses, abandonment (on an
// internal goroutine), alone and with a continuation suspended inside, and
// a nested body that panics into its parent.

// labelsDeep recurses d levels, each with a deferred call that checks the
// labels, and at the bottom yields n times, then does end.
//
//go:noinline
func labelsDeep(lc *labelChecker, s *scope.Scope, d, n int, want *unsafe.Pointer, end func()) {
	defer func() { lc.want(fmt.Sprintf("deferred call at depth %d", d), *want) }()
	if d == 0 {
		for range n {
			continuation.Yield(s)
		}
		end()
		return
	}
	labelsDeep(lc, s, d-1, n, want, end)
}

// TestLabelsAcrossBarrier: a body with labels of its own yields deep
// in a recursion whose every frame has a deferred call, is resumed by a
// goroutine with other labels, and panics (recovered half-way down) or
// calls runtime.Goexit at the bottom: the deferred calls of the frozen
// frames, run as the panic or Goexit crosses the barrier, see the body's
// labels, and the resumer its own after.
func TestLabelsAcrossBarrier(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	for _, end := range []string{"panic", "Goexit"} {
		t.Run(end, func(t *testing.T) {
			lc := &labelChecker{t: t}
			s := scope.New(t.Name())
			setLabels()
			var own unsafe.Pointer
			c := continuation.New(s, func() {
				own = setLabels("req", "deep body")
				func() {
					defer func() {
						if end == "panic" && recover() == nil {
							t.Error("no panic recovered")
						}
						lc.want("the body's recovering deferred call", own)
					}()
					labelsDeep(lc, s, 40, 2, &own, func() {
						runtime.GC()
						if end == "panic" {
							panic("deep")
						}
						runtime.Goexit()
					})
				}()
				lc.want("the body after the recover", own)
				continuation.Yield(s)
				lc.want("the body after its last yield", own)
			})
			c.Run()
			lc.want("the first runner", nil)
			for r := 0; !c.IsDone(); r++ {
				lc.onGoroutine(fmt.Sprintf("resume %d", r), func() {
					if end == "Goexit" {
						mine := profLabel()
						defer func() {
							// Goexit: the goroutine's deferred calls
							// run under its own labels.
							lc.want("the resumer's deferred call", mine)
						}()
					}
					c.Run()
				}, "who", fmt.Sprint("resumer ", r))
			}
		})
	}
}

// TestLabelsNestedPinnedByEnclosing: an inner body with labels of
// its own yields to the outer scope while a frame the stack-copying
// backend cannot freeze (a reflect.MakeFunc stub) lies between the outer
// body and the inner Run: the yield is refused after the inner region was frozen
// and unmounted, and the inner body goes on under its own labels, the
// outer body under its own.
func TestLabelsNestedPinnedByEnclosing(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	lc := &labelChecker{t: t}
	so, si := scope.New(t.Name()+" outer"), scope.New(t.Name()+" inner")
	first := setLabels("who", "first")
	var outerOwn, innerOwn unsafe.Pointer
	pinned := 0
	outer := continuation.New(so, func() {
		outerOwn = setLabels("req", "outer")
		inner := continuation.New(si, func() {
			innerOwn = setLabels("req", "inner")
			for r := range 3 {
				ok := continuation.Yield(so)
				lc.want(fmt.Sprintf("the inner body after yield %d to the outer scope (ok=%v)", r, ok), innerOwn)
				continuation.Yield(si)
				lc.want(fmt.Sprintf("the inner body after yield %d to its own scope", r), innerOwn)
			}
		})
		for !inner.IsDone() {
			pinMakeFunc(inner.Run)
			lc.want("the outer body after the inner one's Run", outerOwn)
		}
	}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
		pinned++
		lc.want("the outer onPinned handler (inner body's)", innerOwn)
	}))
	outer.Run()
	lc.want("the first runner", first)
	for r := 0; !outer.IsDone(); r++ {
		lc.onGoroutine(fmt.Sprintf("resume %d", r), outer.Run, "who", fmt.Sprint("runner ", r))
	}
	t.Logf("%s: %d yields pinned", continuation.Backend(), pinned)
	if pinStackCopy() && pinned == 0 {
		t.Errorf("no yield to the outer scope pinned")
	}
}

// TestLabelsAbandon: an abandoned body's deferred calls run under
// its labels, alone and with a nested continuation suspended inside it by
// a yield to the outer scope, each under its own.
func TestLabelsAbandon(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprint("nested=", nested), func(t *testing.T) {
			lc := &labelChecker{t: t}
			var ran atomic.Int32
			func() {
				so, si := scope.New("outer"), scope.New("inner")
				runner := setLabels("who", "runner")
				var outerOwn, innerOwn unsafe.Pointer
				c := continuation.New(so, func() {
					outerOwn = setLabels("req", "abandoned outer")
					defer func() {
						lc.want("the abandoned outer body's deferred call", outerOwn)
						ran.Add(1)
					}()
					if nested {
						in := continuation.New(si, func() {
							innerOwn = setLabels("req", "abandoned inner")
							defer func() {
								lc.want("the abandoned inner body's deferred call", innerOwn)
								ran.Add(1)
							}()
							continuation.Yield(so)
						})
						in.Run()
						return
					}
					continuation.Yield(so)
				})
				c.Run()
				lc.want("the runner after Run", runner)
			}()
			want := int32(1)
			if nested {
				want = 2
			}
			deadline := time.Now().Add(10 * time.Second)
			for ran.Load() < want && time.Now().Before(deadline) {
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
			if got := ran.Load(); got < want {
				t.Fatalf("%d deferred calls ran, want %d", got, want)
			}
		})
	}
}

// TestLabelsNestedPanicIntoParent: an inner body resumed through a
// yield to the outer scope (so mounted by the outer Run's loop, on another
// goroutine) panics out of its Run into the outer body, which recovers:
// the inner body's deferred call sees the inner labels, the outer body's
// the outer ones, and the outer body goes on, and yields, with its own.
func TestLabelsNestedPanicIntoParent(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	for _, end := range []string{"panic", "Goexit"} {
		t.Run(end, func(t *testing.T) {
			lc := &labelChecker{t: t}
			so, si := scope.New(t.Name()+" outer"), scope.New(t.Name()+" inner")
			setLabels()
			var outerOwn, innerOwn unsafe.Pointer
			outer := continuation.New(so, func() {
				outerOwn = setLabels("req", "outer")
				defer func() { lc.want("the outer body's last deferred call", outerOwn) }()
				inner := continuation.New(si, func() {
					innerOwn = setLabels("req", "inner")
					defer func() { lc.want("the inner body's deferred call", innerOwn) }()
					continuation.Yield(so)
					lc.want("the inner body after the yield to the outer scope", innerOwn)
					if end == "panic" {
						panic("inner")
					}
					runtime.Goexit()
				})
				func() {
					defer func() {
						if end == "panic" && recover() == nil {
							t.Error("the inner panic did not reach the outer body")
						}
						lc.want("the outer body's recovering deferred call", outerOwn)
					}()
					inner.Run()
				}()
				lc.want("the outer body after the recover", outerOwn)
				continuation.Yield(so)
				lc.want("the outer body after its last yield", outerOwn)
			})
			outer.Run()
			lc.want("the first runner", nil)
			for r := 0; !outer.IsDone(); r++ {
				lc.onGoroutine(fmt.Sprintf("resume %d", r), func() {
					mine := profLabel()
					defer func() { lc.want("the resumer's deferred call", mine) }()
					outer.Run()
				}, "who", fmt.Sprint("runner ", r))
			}
		})
	}
}

// TestLabelsPullStartsAsIterPull: iter.Pull's body goroutine is
// created by iter.Pull itself (runtime.newcoro), so it starts with the
// labels of the goroutine that called iter.Pull, not of the one that
// first calls next; continuation.Pull's body does the same, on both
// backends, as docs/api.md promises.
func TestLabelsPullStartsAsIterPull(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	atCreate := setLabels("who", "creator")
	var iterSaw, weftSaw unsafe.Pointer
	seq := func(saw *unsafe.Pointer) func(func(int) bool) {
		return func(yield func(int) bool) {
			*saw = profLabel()
			yield(1)
		}
	}
	inext, istop := iter.Pull(seq(&iterSaw))
	wnext, wstop := continuation.Pull(seq(&weftSaw))
	defer istop()
	defer wstop()
	setLabels("who", "first next")
	inext()
	wnext()
	if iterSaw != atCreate {
		t.Fatalf("iter.Pull's body started with %s, want the creator's %s (the premise)", labelsOf(iterSaw), labelsOf(atCreate))
	}
	if weftSaw != iterSaw {
		t.Errorf("continuation.Pull's body started with %s; iter.Pull's with %s (the creator's)", labelsOf(weftSaw), labelsOf(iterSaw))
	}
}
