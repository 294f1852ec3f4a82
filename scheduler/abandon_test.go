package scheduler

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// A continuation that a virtual thread ran and dropped while suspended is
// abandoned once the collector finds it unreachable: its deferred calls
// run on a goroutine of their own, inside no virtual thread. There
// Current is nil on both backends. (On the portable backend the
// continuation's stale link to the goroutine that last ran it must not
// name a thread another carrier runs: a Go or Unpark there would use that
// carrier's state from the wrong goroutine, which the race detector sees.)
func TestAbandonedDeferHasNoCurrent(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	us := scope.New("user")
	const n = 200
	var ran, wrong atomic.Int32
	var children atomic.Int32
	vt, _ := s.Go(func(ctx context.Context) error {
		func() {
			for range n {
				k := continuation.New(us, func() {
					defer func() {
						if Current() != nil {
							wrong.Add(1)
						}
						ran.Add(1)
						// From outside any virtual thread, Go queues
						// globally.
						s.Go(func(context.Context) error { children.Add(1); return nil })
					}()
					continuation.Yield(us)
				})
				k.Run() // suspended, and dropped
			}
		}()
		// Keep running (Current is this thread) while they are abandoned.
		for deadline := time.Now().Add(5 * time.Second); ran.Load() < n && time.Now().Before(deadline); {
			runtime.GC()
		}
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != n {
		t.Fatalf("%d of %d abandoned continuations ran their deferred calls", ran.Load(), n)
	}
	if w := wrong.Load(); w != 0 {
		t.Fatalf("%d of %d deferred calls of abandoned continuations saw a virtual thread as Current", w, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for children.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if children.Load() != n {
		t.Fatalf("%d of %d threads started from the deferred calls ran", children.Load(), n)
	}
}
