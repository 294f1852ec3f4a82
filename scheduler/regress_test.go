package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Regression tests for bugs a review found: each failed before its fix.

// doneWithin reports whether vt ends within d.
func doneWithin(vt *VThread, d time.Duration) bool {
	select {
	case <-vt.Done():
		return true
	case <-time.After(d):
		return false
	}
}

// A virtual thread that joins one of another scheduler is woken onto its
// own scheduler's carriers: finish used to queue it on the carrier of the
// thread that ended, so it ran there (two threads of a one-carrier
// scheduler at once) and was counted out of the wrong scheduler.
func TestJoinAcrossSchedulers(t *testing.T) {
	s1 := newTest(t, Options{Carriers: 1})
	s2 := newTest(t, Options{Carriers: 1})
	for round := range 20 {
		a := goOrFatal(t, s1, func(ctx context.Context) error {
			Sleep(time.Millisecond)
			return nil
		})
		var wrong atomic.Bool
		j := goOrFatal(t, s2, func(ctx context.Context) error {
			if round%2 == 0 {
				a.Join() // the first joiner
			} else {
				a.Wait(ctx) // a waiter on the list
			}
			if c := Current().carrier; c == nil || c.s != s2 {
				wrong.Store(true)
			}
			return nil
		})
		if !doneWithin(j, 5*time.Second) {
			t.Fatal("the joining virtual thread did not finish")
		}
		if wrong.Load() {
			t.Fatalf("round %d: a virtual thread of s2 ran on another scheduler's carrier after joining", round)
		}
		waitUntil(t, "both schedulers empty", func() bool { return s1.Live() == 0 && s2.Live() == 0 })
	}
}

// A compensation carrier steals from every carrier: its id is past the
// carriers', and the steal loop used to skip carrier 0. A virtual thread
// starts a helper (on its carrier's queue) and then blocks its carrier
// pinned until the helper has run; with two carriers the other one is
// blocked pinned first, and the rounds land on carrier 0 some of the time.
func TestCompensationStealsFromEveryCarrier(t *testing.T) {
	helped := func(t *testing.T, s *Scheduler) (onCarrier0 bool) {
		var helped, on0 atomic.Bool
		v := goOrFatal(t, s, func(ctx context.Context) error {
			self := Current()
			on0.Store(self.carrier == s.carriers[0])
			if _, err := s.Go(func(ctx context.Context) error {
				helped.Store(true)
				self.Unpark()
				return nil
			}); err != nil {
				return err
			}
			parkPinnedUntil(&helped)
			return nil
		})
		if !doneWithin(v, 5*time.Second) {
			t.Fatalf("the helper stayed on the queue of a blocked carrier (carrier 0: %v): no compensation carrier took it", on0.Load())
		}
		return on0.Load()
	}
	t.Run("carriers=1", func(t *testing.T) {
		helped(t, newTest(t, Options{Carriers: 1, MaxCompensation: 1}))
	})
	t.Run("carriers=2", func(t *testing.T) {
		s := newTest(t, Options{Carriers: 2, MaxCompensation: 2})
		on0 := 0
		for range 10 {
			var release atomic.Bool
			b := goOrFatal(t, s, func(ctx context.Context) error { parkPinnedUntil(&release); return nil })
			waitUntil(t, "one carrier blocked", func() bool { return s.blocked.Load() == 1 })
			if helped(t, s) {
				on0++
			}
			release.Store(true)
			b.Unpark()
			if err := b.Join(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%d of 10 rounds on carrier 0", on0)
	})
}

// Go racing Shutdown either is refused or runs: it used to check closing
// before counting the new thread live, so Shutdown could see none live,
// let the carriers exit, and leave an accepted thread that never ran.
func TestGoRacesShutdown(t *testing.T) {
	rounds, perSpawner := 300, math.MaxInt
	if testing.Short() {
		rounds = 50
	}
	if raceEnabled {
		// Under the race detector every virtual thread that runs leaks
		// about 5 KB of the detector's memory (the portable backend's
		// iter.Pull: docs/limitations.md), and at GOMAXPROCS=1 the
		// spawners ran 10,000 to 30,000 a round before Shutdown got
		// the processor: 300 rounds took 10 GB and more. 500 a spawner
		// (each at several microseconds under the detector) still
		// outlast Shutdown's start, at most 50 µs in, wherever the
		// test's goroutine runs beside them.
		rounds, perSpawner = 50, 500
	}
	for round := range rounds {
		s, err := New(Options{Carriers: 2, LockOSThread: new(bool)})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var accepted []*VThread
		var wg, ready sync.WaitGroup
		for range 3 {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				for range perSpawner {
					vt, err := s.Go(nop)
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Go: %v", err)
						}
						return
					}
					mu.Lock()
					accepted = append(accepted, vt)
					mu.Unlock()
				}
			}()
		}
		ready.Wait()
		time.Sleep(time.Duration(round%50) * time.Microsecond)
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, vt := range accepted {
			if !vt.finished() {
				t.Fatalf("round %d: Go accepted a virtual thread that had not run when Shutdown returned (Live=%d)", round, s.Live())
			}
		}
	}
}

func nop(context.Context) error { return nil }

// detCancelTrace runs, deterministically, a group in which one child fails
// while another waits on the group's context and a third ticks the clock,
// and returns what happened when.
func detCancelTrace(t *testing.T, seed uint64) string {
	s, err := New(Options{Deterministic: true, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var trace []string
	logf := func(f string, a ...any) {
		trace = append(trace, fmt.Sprintf("%v ", s.Now().Sub(epoch))+fmt.Sprintf(f, a...))
	}
	main := goOrFatal(t, s, func(ctx context.Context) error {
		// A virtual thread outside the group that ends after it: only
		// the group's context ends a Wait for it.
		hold := NewChan[int](0)
		held, err := s.Go(func(ctx context.Context) error {
			hold.Recv()
			return nil
		})
		if err != nil {
			return err
		}
		defer hold.Close()
		g, gctx := s.NewGroup(ctx)
		ch := NewChan[int](0)
		g.Go(func(ctx context.Context) error {
			_, _, err := ch.RecvContext(gctx)
			logf("receiver woke: %v", err)
			return nil
		})
		g.Go(func(ctx context.Context) error {
			err := held.Wait(gctx)
			logf("waiter woke: %v", err)
			return nil
		})
		g.Go(func(ctx context.Context) error {
			Sleep(time.Millisecond)
			logf("failing")
			return errors.New("fail")
		})
		g.Go(func(ctx context.Context) error {
			for i := range 10 {
				Sleep(time.Millisecond)
				logf("tick %d", i)
			}
			return nil
		})
		g.Wait()
		return nil
	})
	if err := main.Join(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(trace, "\n")
}

// In deterministic mode a context cancelled by one of the scheduler's own
// virtual threads wakes its waiters at the same point in every run: it
// used to go through context.AfterFunc's goroutine, whenever the Go
// runtime ran it, while the virtual clock went on.
func TestDeterministicContextCancel(t *testing.T) {
	first := detCancelTrace(t, 42)
	if !strings.Contains(first, "receiver woke: context canceled") || !strings.Contains(first, "waiter woke: context canceled") {
		t.Fatalf("the waiters were not woken by the group's cancellation:\n%s", first)
	}
	runs := 100
	if testing.Short() {
		runs = 20
	}
	for i := range runs {
		if got := detCancelTrace(t, 42); got != first {
			t.Fatalf("run %d with the same seed interleaved differently:\n%s\nwant:\n%s", i+1, got, first)
		}
	}
}

// The virtual clock never goes back, not for a negative duration either.
func TestDeterministicClockMonotonic(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	var before, after time.Time
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		Sleep(time.Second)
		before = s.Now()
		self := Current()
		var fired atomic.Bool
		s.AfterFunc(-500*time.Millisecond, func() { fired.Store(true); self.Unpark() })
		for !fired.Load() {
			Park()
		}
		after = s.Now()
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if after.Before(before) {
		t.Fatalf("the virtual clock went back: %v, then %v", before.Sub(epoch), after.Sub(epoch))
	}
}

// A Wait whose context ends leaves no waiter behind on the thread it
// waited for: they used to pile up until that thread ended.
func TestWaitTimeoutLeavesNoWaiter(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	var stop atomic.Bool
	long := goOrFatal(t, s, func(ctx context.Context) error {
		for !stop.Load() {
			Park()
		}
		return nil
	})
	poll := goOrFatal(t, s, func(ctx context.Context) error {
		for range 1000 {
			c, cancel := context.WithTimeout(ctx, time.Nanosecond)
			err := long.Wait(c)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("Wait = %v, want a deadline", err)
			}
		}
		return nil
	})
	if err := poll.Join(); err != nil {
		t.Fatal(err)
	}
	long.joinMu.Lock()
	n := 0
	for w := long.rareLocked().joinq; w != nil; w = w.next {
		n++
	}
	long.joinMu.Unlock()
	stop.Store(true)
	long.Unpark()
	if n != 0 {
		t.Errorf("%d waiters left on the thread after 1,000 timed-out Waits", n)
	}
	if err := long.Join(); err != nil {
		t.Fatal(err)
	}
}

// Shutdown and Close called from one of the scheduler's own virtual
// threads panic with a message instead of waiting for themselves.
func TestShutdownFromOwnVThread(t *testing.T) {
	for _, op := range []string{"Shutdown", "Close"} {
		s := newTest(t, Options{Carriers: 1})
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			if op == "Shutdown" {
				s.Shutdown(context.Background())
			} else {
				s.Close()
			}
			return nil
		})
		if !doneWithin(vt, 5*time.Second) {
			t.Fatalf("%s from a virtual thread hangs", op)
		}
		var pe *PanicError
		if err := vt.Join(); !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "own virtual threads") {
			t.Fatalf("%s from a virtual thread: %v, want a panic that says why", op, err)
		}
	}
}
