package continuation_test

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// An abandoned continuation whose deferred calls try to yield while it
// unwinds, nested inside another abandoned continuation: both bodies must
// unwind completely (inner first), no deferred call may resume past its
// yield, and no goroutine may remain.
func TestAbandonedDeferredCallsThatYield(t *testing.T) {
	base := runtime.NumGoroutine()
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	func() {
		outer, inner := scope.New("outer"), scope.New("inner")
		c := continuation.New(outer, func() {
			defer func() {
				note("outer defer")
				continuation.Yield(outer)
				t.Error("outer deferred call resumed after yielding while abandoned")
			}()
			d := continuation.New(inner, func() {
				defer func() {
					note("inner defer")
					continuation.Yield(inner)
					t.Error("inner deferred call resumed after yielding while abandoned")
				}()
				continuation.Yield(outer)
				t.Error("abandoned inner body resumed")
			})
			d.Run()
			t.Error("abandoned outer body resumed")
		})
		c.Run()
	}()
	want := []string{"inner defer", "outer defer"}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		mu.Lock()
		done := len(order) == len(want)
		mu.Unlock()
		if done && runtime.NumGoroutine() <= base {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		t.Errorf("deferred calls ran as %q, want %q", order, want)
	}
	if n := runtime.NumGoroutine() - base; n > 0 {
		t.Errorf("%d goroutines remain after the continuations were abandoned", n)
	}
}
