package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A deterministic AfterFunc armed with a due duration by the last virtual
// thread to end during a draining Shutdown: the thread that ends lets the
// scheduler drain, and the timer then fired at the carrier's next look and
// started f's thread after Shutdown had seen the scheduler drained. When f
// parked (a Sleep), the carrier saw the scheduler drained and exited:
// Shutdown returned nil with a virtual thread still live, parked for good
// (Live 1, f never finished). A timer not yet fired when the last thread
// ends is dropped, as api.md says of a pending one.
func TestAuditDetDueAfterFuncAtDrain(t *testing.T) {
	s, err := New(Options{Deterministic: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var started, finished atomic.Bool
	release := make(chan struct{})
	vt, _ := s.Go(func(context.Context) error {
		<-release // blocks the carrier until Shutdown has begun
		s.AfterFunc(0, func() {
			started.Store(true)
			Sleep(time.Millisecond)
			finished.Store(true)
		})
		return nil
	})
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	for !s.closing.Load() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if n := s.Live(); n != 0 || started.Load() != finished.Load() {
		t.Fatalf("after Shutdown returned nil: Live = %d, AfterFunc's f started %v, finished %v", n, started.Load(), finished.Load())
	}
}
