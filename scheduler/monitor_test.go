package scheduler

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// A virtual thread queued by one that then runs on without parking waits
// for no more than the monitor's ticks: the wake-up its carrier owes is
// paid, and an idle carrier runs it while the first still spins.
func TestOwedWakeIsPaidWhileTheQueuerRuns(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	var longest time.Duration
	for round := range 20 {
		var started atomic.Bool
		var waited time.Duration
		spinner := goOrFatal(t, s, func(ctx context.Context) error {
			// Let the other carrier go idle first.
			time.Sleep(time.Millisecond)
			if _, err := s.Go(func(ctx context.Context) error {
				started.Store(true)
				return nil
			}); err != nil {
				return err
			}
			begin := time.Now()
			for !started.Load() {
				if time.Since(begin) > 2*time.Second {
					break
				}
				// A call that yields: a loop without one is never preempted under
				// GODEBUG=gccheckmark=1, and a collection would wait for it for ever.
				runtime.Gosched()
			}
			waited = time.Since(begin)
			return nil
		})
		if err := joinWithin(t, spinner); err != nil {
			t.Fatal(err)
		}
		if !started.Load() {
			t.Fatalf("round %d: the queued virtual thread did not start in %v while its queuer ran on", round, waited)
		}
		longest = max(longest, waited)
	}
	// How long is not a pass/fail matter (a loaded machine stretches the
	// ticks); the log shows it against the design's two ticks.
	t.Logf("the longest wait: %v (two monitor ticks: %v)", longest, 2*monitorTick)
}

// A carrier blocked in a plain Go channel receive (not a park) by the
// virtual thread it runs does not keep what that virtual thread queued:
// the monitor wakes the idle carrier, which runs it and unblocks the
// first. The same with a carrier blocked pinned and no compensation
// carrier: the other carrier must run the virtual thread that unparks the
// pinned one (the carrier pays its owed wake-up itself before it blocks,
// rather than leave it to the monitor).
func TestOwedWakeWhenTheCarrierBlocks(t *testing.T) {
	s := newTest(t, Options{Carriers: 2, MaxCompensation: -1})
	for round := range 10 {
		ch := make(chan struct{})
		blocker := goOrFatal(t, s, func(ctx context.Context) error {
			time.Sleep(time.Millisecond) // the other carrier goes idle
			if _, err := s.Go(func(ctx context.Context) error { close(ch); return nil }); err != nil {
				return err
			}
			<-ch // blocks the carrier
			return nil
		})
		if err := joinWithin(t, blocker); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}

		pinned := goOrFatal(t, s, func(ctx context.Context) error {
			time.Sleep(time.Millisecond)
			me := Current()
			if _, err := s.Go(func(ctx context.Context) error { me.Unpark(); return nil }); err != nil {
				return err
			}
			pinning.Do(Park) // blocks the carrier, pinned, until the Unpark
			return nil
		})
		if err := joinWithin(t, pinned); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// The monitor parks once nothing is owed, and exits at Shutdown: after it
// the scheduler leaves no goroutine behind (the leak tests check that for
// every scheduler); here, that a parked monitor wakes for a new owed
// wake-up.
func TestMonitorParksAndWakes(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	waitUntil(t, "the monitor to park", s.monitorParked.Load)
	var started atomic.Bool
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		time.Sleep(time.Millisecond)
		if _, err := s.Go(func(ctx context.Context) error { started.Store(true); return nil }); err != nil {
			return err
		}
		for begin := time.Now(); !started.Load() && time.Since(begin) < 2*time.Second; {
			// A call that yields: a loop without one is never preempted under
			// GODEBUG=gccheckmark=1, and a collection would wait for it for ever.
			runtime.Gosched()
		}
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if !started.Load() {
		t.Fatal("a parked monitor did not pay the owed wake-up")
	}
}

// A virtual thread that parks while an Unpark races in is queued again by
// its carrier, behind one whose wake-up the carrier owes; the carrier then
// runs the re-queued one (the tail), which blocks it on a plain channel
// that only the first closes. The re-queue must wake a carrier for the
// first (it did not, and the carrier forgot what it owed: a deadlock).
func TestOwedWakeSurvivesRequeue(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	for round := range rounds {
		ch := make(chan struct{})
		var ready atomic.Bool
		var parker atomic.Pointer[VThread]
		unparked := make(chan struct{})
		go func() {
			defer close(unparked)
			for !ready.Load() {
				runtime.Gosched()
			}
			for range round % 64 {
			}
			parker.Load().Unpark()
		}()
		p := goOrFatal(t, s, func(ctx context.Context) error {
			parker.Store(Current())
			if _, err := s.Go(func(ctx context.Context) error { close(ch); return nil }); err != nil {
				return err
			}
			ready.Store(true)
			Park()
			<-ch // blocks the carrier until the other virtual thread runs
			return nil
		})
		if !doneWithin(p, 5*time.Second) {
			t.Fatalf("round %d: hung", round)
		}
		<-unparked
		if err := p.Join(); err != nil {
			t.Fatal(err)
		}
	}
}

// A pinned Yield keeps its carrier, so what the yielding virtual thread
// queued there cannot run on it: the carrier pays the wake-up it owes for
// it, as a pinned park does, so that an idle carrier takes it at once
// rather than a monitor tick or two later.
func TestPinnedYieldPaysOwedWake(t *testing.T) {
	s := newTest(t, Options{Carriers: 2, MaxCompensation: -1})
	for round := range 20 {
		var owedAfter uint64
		ran := make(chan struct{})
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			for s.nidle.Load() == 0 { // the other carrier goes idle
				runtime.Gosched()
			}
			pinning.Do(func() {
				if _, err := s.Go(func(context.Context) error { close(ran); return nil }); err != nil {
					t.Error(err)
					return
				}
				Yield() // pinned: keeps the carrier
				owedAfter = Current().carrier.owed.Load()
			})
			<-ran
			return nil
		})
		if err := joinWithin(t, vt); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if owedAfter != 0 {
			t.Fatalf("round %d: after a pinned Yield the carrier still owes the wake-up for what it queued (owed=%d)", round, owedAfter)
		}
	}
}
