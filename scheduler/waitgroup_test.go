package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestWaitGroupGoNilScheduler: WaitGroup.Go adds one to the counter
// before it calls s.Go; if that panics (a nil *Scheduler), the counter
// must not stay raised, or every later Wait hangs.
func TestWaitGroupGoNilScheduler(t *testing.T) {
	var wg WaitGroup
	msg := mustPanic(t, func() {
		wg.Go(nil, func(context.Context) error { return nil })
	})
	if !strings.Contains(msg, "Scheduler") {
		t.Errorf("panic %q does not say what was wrong", msg)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		wg.Done()
		t.Fatalf("Wait hangs after a WaitGroup.Go that panicked: counter left at 1")
	}
}
