package scheduler

import (
	"context"
	"strings"
	"sync/atomic"
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

func TestWaitGroup(t *testing.T) {
	s := newSched(t, Options{})
	var wg WaitGroup
	wg.Wait() // zero: returns at once
	const workers = 50
	var finished atomic.Int32
	wg.Add(workers)
	for i := range workers {
		if i%2 == 0 {
			s.Go(func(context.Context) error { Sleep(time.Millisecond); finished.Add(1); wg.Done(); return nil })
		} else {
			go func() { time.Sleep(time.Millisecond); finished.Add(1); wg.Done() }()
		}
	}
	var bad atomic.Int32
	mixed(t, s, 5, 3, func(int) {
		wg.Wait()
		if finished.Load() != workers {
			bad.Add(1)
		}
	})
	if bad.Load() != 0 {
		t.Fatalf("%d Waits returned before the counter reached zero", bad.Load())
	}
	if msg := mustPanic(t, wg.Done); !strings.Contains(msg, "negative WaitGroup counter") {
		t.Fatalf("panic %q", msg)
	}
	// Go.
	var ran atomic.Int32
	for range 10 {
		if _, err := wg.Go(s, func(context.Context) error { ran.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, done, 5*time.Second, "WaitGroup.Go")
	if ran.Load() != 10 {
		t.Fatalf("ran %d", ran.Load())
	}
}

func TestWaitGroupRounds(t *testing.T) {
	s := newSched(t, Options{})
	rounds := iters(3000, 500)
	main, _ := s.Go(func(context.Context) error {
		for r := range rounds {
			var wg WaitGroup
			wg.Add(2)
			s.Go(func(context.Context) error { wg.Done(); return nil })
			go wg.Done()
			wg.Wait()
			if r%100 == 0 {
				Yield()
			}
		}
		return nil
	})
	done := make(chan struct{})
	go func() { main.Join(); close(done) }()
	waitDone(t, done, 60*time.Second, "WaitGroup rounds")
}
