package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Fairness: a carrier whose own queue never empties must still run the
// global queue and the oldest of its own queue. Two virtual threads that
// hand a value back and forth over Chans refill their carrier's queue at
// every pick; before next's fairness rule, whatever waited in the global
// queue (a Sleep's timer wake-up, a Yield, a Go from a plain goroutine) or
// beneath the pair in the carrier's own queue never ran.

// fairnessGiveUp is how long the busy pairs below run at most: a starved
// virtual thread runs once they stop, so a regression fails the test
// instead of hanging it.
const fairnessGiveUp = 10 * time.Second

// busyPair starts two virtual threads on s that pass a value back and
// forth until stop is set or fairnessGiveUp has passed, and returns a
// function that waits for them and reports whether they were stopped
// rather than gave up. It may be called from a virtual thread.
func busyPair(t *testing.T, s *Scheduler, stop *atomic.Bool) (stopped func() bool) {
	mustGo := func(fn func(ctx context.Context) error) *VThread {
		vt, err := s.Go(fn)
		if err != nil {
			panic(err) // not t.Fatal: this may run in a virtual thread
		}
		return vt
	}
	giveUp := time.Now().Add(fairnessGiveUp)
	ab, ba := NewChan[int](0), NewChan[int](0)
	var byStop atomic.Bool
	a := mustGo(func(ctx context.Context) error {
		for {
			if stop.Load() {
				byStop.Store(true)
				break
			}
			if time.Now().After(giveUp) {
				break
			}
			ab.Send(1)
			ba.Recv()
		}
		ab.Close()
		return nil
	})
	b := mustGo(func(ctx context.Context) error {
		for {
			if _, ok := ab.Recv(); !ok {
				return nil
			}
			ba.Send(1)
		}
	})
	return func() bool {
		joinWithin(t, a)
		joinWithin(t, b)
		return byStop.Load()
	}
}

// TestFairGlobalQueue: with one busy pair on each carrier, a virtual
// thread started from the test's goroutine (the global queue) runs, its
// Sleep's timer wakes it (the global queue again), and one that yields
// (the global queue) goes on.
func TestFairGlobalQueue(t *testing.T) {
	for _, carriers := range []int{1, 2} {
		s := newTest(t, Options{Carriers: carriers})
		var stop atomic.Bool
		var pairs []func() bool
		for range carriers {
			pairs = append(pairs, busyPair(t, s, &stop))
		}
		time.Sleep(10 * time.Millisecond) // the pairs are busy
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			Sleep(time.Millisecond)
			for range 3 {
				Yield()
			}
			stop.Store(true)
			return nil
		})
		joinWithin(t, vt)
		for i, stopped := range pairs {
			if !stopped() {
				t.Errorf("carriers=%d: busy pair %d gave up after %v before a virtual thread that started from a goroutine, slept and yielded three times could stop it: it starved in the global queue", carriers, i, fairnessGiveUp)
			}
		}
	}
}

// TestFairOwnQueue: a virtual thread queued on a carrier beneath a busy
// pair runs. (The carrier takes the newest of its own queue first.)
func TestFairOwnQueue(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	var stop atomic.Bool
	var stopped func() bool
	var first *VThread
	starter := goOrFatal(t, s, func(ctx context.Context) error {
		// Queued on this carrier first, then the pair above it.
		var err error
		first, err = s.Go(func(ctx context.Context) error {
			stop.Store(true)
			return nil
		})
		if err != nil {
			return err
		}
		stopped = busyPair(t, s, &stop)
		return nil
	})
	if err := joinWithin(t, starter); err != nil {
		t.Fatal(err)
	}
	joinWithin(t, first)
	if !stopped() {
		t.Errorf("the busy pair gave up after %v before the virtual thread queued beneath it ran", fairnessGiveUp)
	}
}
