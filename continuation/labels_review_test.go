package continuation_test

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// Review tests of the paths TestLabels* leave out: a panic and a Goexit
// that cross the return barrier with frozen frames' deferred calls pending
// (frozenPanic, the Goexit rethrow), a yield to an enclosing scope that the
// enclosing region refuses (scNested's pinErr path), Abandon (scCancel on a
// fresh goroutine), alone and with a continuation suspended inside, and a
// nested body that panics into its parent.

// reviewDeep recurses d levels, each with a deferred call that checks the
// labels, and at the bottom yields n times, then does end.
//
//go:noinline
func reviewDeep(lc *labelChecker, s *scope.Scope, d, n int, want *unsafe.Pointer, end func()) {
	defer func() { lc.want(fmt.Sprintf("deferred call at depth %d", d), *want) }()
	if d == 0 {
		for range n {
			continuation.Yield(s)
		}
		end()
		return
	}
	reviewDeep(lc, s, d-1, n, want, end)
}

// TestReviewLabelsAcrossBarrier: a body with labels of its own yields deep
// in a recursion whose every frame has a deferred call, is resumed by a
// goroutine with other labels, and panics (recovered half-way down) or
// calls runtime.Goexit at the bottom: the deferred calls of the frozen
// frames, run as the panic or Goexit crosses the barrier, see the body's
// labels, and the resumer its own after.
func TestReviewLabelsAcrossBarrier(t *testing.T) {
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
					reviewDeep(lc, s, 40, 2, &own, func() {
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

// TestReviewLabelsNestedPinnedByEnclosing: an inner body with labels of
// its own yields to the outer scope while a frame the stack-copying
// backend cannot freeze (a reflect call) lies between the outer body and
// the inner Run: the yield is refused after the inner region was frozen
// and unmounted, and the inner body goes on under its own labels, the
// outer body under its own.
func TestReviewLabelsNestedPinnedByEnclosing(t *testing.T) {
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
			reflect.ValueOf(inner.Run).Call(nil)
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
}

// TestReviewLabelsAbandon: an abandoned body's deferred calls run under
// its labels, alone and with a nested continuation suspended inside it by
// a yield to the outer scope, each under its own.
func TestReviewLabelsAbandon(t *testing.T) {
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

// TestReviewLabelsNestedPanicIntoParent: an inner body resumed through a
// yield to the outer scope (so mounted by scMount's loop, on another
// goroutine) panics out of its Run into the outer body, which recovers:
// the inner body's deferred call sees the inner labels, the outer body's
// the outer ones, and the outer body goes on, and yields, with its own.
func TestReviewLabelsNestedPanicIntoParent(t *testing.T) {
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

// TestReviewLabelsPullStartsAsIterPull: iter.Pull's body goroutine is
// created by iter.Pull itself (runtime.newcoro), so it starts with the
// labels of the goroutine that called iter.Pull, not of the one that
// first calls next; continuation.Pull's body does the same. (A review
// found that it started with those of the first next, on both backends,
// while docs/api.md compared it with iter.Pull's.)
func TestReviewLabelsPullStartsAsIterPull(t *testing.T) {
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
