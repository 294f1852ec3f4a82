package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/internal/goroutines"
)

// Tests of SleepContext: Sleep that a context can end. Sleep cannot be
// interrupted, so Close and an expired Shutdown, which cancel every
// virtual thread's context, waited for the rest of a thread's sleep.

// hour is a sleep that no test waits out: a test that returns at all
// shows that something ended it.
const hour = time.Hour

// A virtual thread in SleepContext on its own context, for an hour, lets
// Close return: Close cancels the context and the sleep ends with
// context.Canceled. No goroutine is left behind. (Not in deterministic
// mode, whose clock jumps the hour as soon as nothing else is runnable.)
func TestSleepContextCloseInterrupts(t *testing.T) {
	base := goroutines.Settled()
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		return SleepContext(ctx, hour)
	})
	// Parked in the sleep, not cancelled before it began.
	waitUntil(t, "the sleeper to park", func() bool { return vt.state.Load() == vtParked })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits after 10 s on a thread in SleepContext(its context, 1 hour)")
	}
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Errorf("SleepContext = %v, want context.Canceled", err)
	}
	waitUntil(t, "the carriers to exit", func() bool { return goroutines.Settled() <= base })
}

// So does a Shutdown whose context ends: it cancels the sleeper's
// context, and the carriers exit.
func TestSleepContextShutdownInterrupts(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		return SleepContext(ctx, hour)
	})
	waitUntil(t, "the sleeper to park", func() bool { return vt.state.Load() == vtParked })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want its context's deadline", err)
	}
	if !doneWithin(vt, 10*time.Second) {
		t.Fatal("a thread in SleepContext(its context, 1 hour) still sleeps 10 s after Shutdown cancelled it")
	}
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Fatalf("SleepContext = %v, want context.Canceled", err)
	}
}

// In deterministic mode SleepContext sleeps on the virtual clock: a
// context cancelled by another virtual thread at virtual time T ends the
// sleep at T, and one never cancelled lets it end at d exactly. Either
// way it leaves no timer and no watch on its context behind.
func TestSleepContextDeterministic(t *testing.T) {
	const at = 90 * time.Second
	for seed := range uint64(8) {
		s := newTest(t, Options{Deterministic: true, Seed: seed})
		ctx, cancel := context.WithCancel(context.Background())
		var elapsed time.Duration
		var timers, watches int
		vts := goAll(t, s, func(context.Context) error {
			start := s.Now()
			err := SleepContext(ctx, hour)
			elapsed = s.Now().Sub(start)
			// Counted while this thread runs: an idle carrier would
			// advance the clock to a timer left behind, and fire it.
			timers, watches = detRegistered(s)
			return err
		}, func(context.Context) error {
			Sleep(at)
			cancel()
			return nil
		})
		if err := joinWithin(t, vts[0]); !errors.Is(err, context.Canceled) {
			t.Fatalf("seed %d: SleepContext = %v, want context.Canceled", seed, err)
		}
		if elapsed != at {
			t.Errorf("seed %d: SleepContext cancelled at virtual time %v returned after %v", seed, at, elapsed)
		}
		if timers != 0 || watches != 0 {
			t.Errorf("seed %d: %d timers and %d context watches still registered after a cancelled SleepContext returned", seed, timers, watches)
		}

		// Not cancelled: it returns nil once d has passed, not before.
		ctx2, cancel2 := context.WithCancel(context.Background())
		var permitAfter bool
		vt := goOrFatal(t, s, func(context.Context) error {
			start := s.Now()
			if err := SleepContext(ctx2, time.Minute); err != nil {
				return err
			}
			elapsed = s.Now().Sub(start)
			timers, watches = detRegistered(s)
			// A watch left on ctx2 would unpark this thread now.
			cancel2()
			Yield()
			permitAfter = Current().permit.Load()
			return nil
		})
		if err := joinWithin(t, vt); err != nil {
			t.Fatalf("seed %d: SleepContext(not cancelled) = %v", seed, err)
		}
		if elapsed != time.Minute {
			t.Errorf("seed %d: SleepContext(1 minute) returned nil after %v", seed, elapsed)
		}
		if permitAfter {
			t.Errorf("seed %d: cancelling a context after SleepContext returned unparked the thread: its watch was left registered", seed)
		}
		if timers != 0 || watches != 0 {
			t.Errorf("seed %d: %d timers and %d context watches still registered after SleepContext returned nil", seed, timers, watches)
		}
	}
}

// goAll starts fns as virtual threads of s from inside another, and
// returns them. In deterministic mode the carrier then runs none of them
// before all have started: started from a plain goroutine one by one, the
// first could park on a timer and the idle carrier advance the virtual
// clock to it before the next had started.
func goAll(t *testing.T, s *Scheduler, fns ...func(context.Context) error) []*VThread {
	t.Helper()
	vts := make([]*VThread, len(fns))
	root := goOrFatal(t, s, func(context.Context) error {
		for i, fn := range fns {
			vt, err := s.Go(fn)
			if err != nil {
				return err
			}
			vts[i] = vt
		}
		return nil
	})
	if err := joinWithin(t, root); err != nil {
		t.Fatalf("Go: %v", err)
	}
	return vts
}

// detRegistered counts the timers and context watches of a deterministic
// scheduler that are neither stopped nor fired.
func detRegistered(s *Scheduler) (timers, watches int) {
	d := s.det
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.timers {
		if !t.stopped && !t.fired {
			timers++
		}
	}
	for _, w := range d.watches {
		if !w.done {
			watches++
		}
	}
	return timers, watches
}

// When d passes and the context ends at the same virtual time, the
// context wins if it has ended by the time the sleeper runs: SleepContext
// returns nil only if it had not. Which of the two threads runs first
// depends on the seed; the result must agree with it, seed by seed.
func TestSleepContextTie(t *testing.T) {
	const at = time.Second
	sawNil, sawCanceled := false, false
	for seed := range uint64(32) {
		s := newTest(t, Options{Deterministic: true, Seed: seed})
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled atomic.Bool
		var endedAfterCancel bool
		vts := goAll(t, s, func(context.Context) error {
			err := SleepContext(ctx, at)
			endedAfterCancel = cancelled.Load()
			return err
		}, func(context.Context) error {
			Sleep(at)
			cancel()
			cancelled.Store(true)
			return nil
		})
		err := joinWithin(t, vts[0])
		switch {
		case endedAfterCancel && !errors.Is(err, context.Canceled):
			t.Errorf("seed %d: the context was cancelled before the sleeper ran again, and SleepContext = %v, want context.Canceled", seed, err)
		case !endedAfterCancel && err != nil:
			t.Errorf("seed %d: the sleeper ran again before the cancel, and SleepContext = %v, want nil", seed, err)
		}
		sawNil = sawNil || err == nil
		sawCanceled = sawCanceled || err != nil
	}
	if !sawNil || !sawCanceled {
		t.Errorf("the seeds covered one order only (nil: %v, cancelled: %v): pick others", sawNil, sawCanceled)
	}
}

// An Unpark that SleepContext's parks used up is given back, as Sleep
// does (TestSleepKeepsUnpark): one before the sleep, one during a sleep
// that d ends, and one during a sleep that its context ends.
func TestSleepContextKeepsUnpark(t *testing.T) {
	for _, det := range []bool{false, true} {
		s := newTest(t, Options{Carriers: 1, Deterministic: det, Seed: 1})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		before := goOrFatal(t, s, func(context.Context) error {
			Current().Unpark()
			if err := SleepContext(ctx, time.Millisecond); err != nil {
				return err
			}
			Park()
			return nil
		})
		if err := joinWithin(t, before); err != nil {
			t.Fatalf("det=%v, Unpark before: %v", det, err)
		}

		for _, byCtx := range []bool{false, true} {
			sctx, scancel := context.WithCancel(context.Background())
			var sleeper atomic.Pointer[VThread]
			// Long enough that the Unpark does not come with the
			// timer's, which would merge the two.
			d := 100 * time.Millisecond
			if byCtx {
				d = hour
			}
			var sleepErr error
			vts := goAll(t, s, func(context.Context) error {
				sleeper.Store(Current())
				sleepErr = SleepContext(sctx, d)
				Park()
				return nil
			}, func(context.Context) error {
				for sleeper.Load() == nil || sleeper.Load().state.Load() != vtParked {
					Yield()
				}
				vt := sleeper.Load()
				vt.Unpark()
				if !byCtx {
					return nil
				}
				// Once the sleeper has used the Unpark up and parked
				// again, the context ends its sleep.
				for vt.state.Load() != vtParked || vt.permit.Load() {
					Yield()
				}
				scancel()
				return nil
			})
			if err := joinWithin(t, vts[1]); err != nil {
				t.Fatal(err)
			}
			if err := joinWithin(t, vts[0]); err != nil {
				t.Fatalf("det=%v byCtx=%v: %v", det, byCtx, err)
			}
			scancel()
			if byCtx && !errors.Is(sleepErr, context.Canceled) {
				t.Errorf("det=%v: SleepContext = %v, want context.Canceled", det, sleepErr)
			}
			if !byCtx && sleepErr != nil {
				t.Errorf("det=%v: SleepContext = %v, want nil", det, sleepErr)
			}
		}
	}
}

// A context that has already ended returns its error at once, whatever d,
// in a virtual thread and in a plain goroutine; in deterministic mode the
// clock does not move.
func TestSleepContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{-1, 0, hour} {
		if err := SleepContext(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("goroutine, d=%v: SleepContext = %v, want context.Canceled", d, err)
		}
	}
	s := newTest(t, Options{Deterministic: true, Seed: 5})
	var moved time.Duration
	vt := goOrFatal(t, s, func(context.Context) error {
		start := s.Now()
		for _, d := range []time.Duration{-1, 0, hour} {
			if err := SleepContext(ctx, d); !errors.Is(err, context.Canceled) {
				return err
			}
		}
		moved = s.Now().Sub(start)
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatalf("SleepContext with a done context = %v, want context.Canceled", err)
	}
	if moved != 0 {
		t.Errorf("the virtual clock moved %v over SleepContexts with a done context", moved)
	}
}

// From a plain goroutine SleepContext sleeps on the wall clock: nil once
// d has passed (and not before), the context's error when it ends first.
func TestSleepContextOutside(t *testing.T) {
	const d = 20 * time.Millisecond
	start := time.Now()
	if err := SleepContext(context.Background(), d); err != nil {
		t.Fatalf("SleepContext(Background, %v) = %v", d, err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("SleepContext(Background, %v) returned nil after %v", d, el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start = time.Now()
	if err := SleepContext(ctx, d); err != nil {
		t.Fatalf("SleepContext(%v) = %v", d, err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("SleepContext(%v) returned nil after %v", d, el)
	}
	if err := SleepContext(ctx, 0); err != nil {
		t.Errorf("SleepContext(0) = %v", err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		cancel()
	}()
	res := make(chan error, 1)
	go func() { res <- SleepContext(ctx, hour) }()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled SleepContext = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SleepContext(1 hour) from a goroutine still sleeps 10 s after its context was cancelled")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer dcancel()
	go func() { res <- SleepContext(dctx, hour) }()
	select {
	case err := <-res:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("SleepContext past its context's deadline = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SleepContext(1 hour) from a goroutine still sleeps 10 s after its context's deadline")
	}
}

// opaqueCtx is a context that context.AfterFunc cannot register with
// directly, as it can with the standard library's: it watches it with a
// goroutine of its own, which only its stop function or the end of the
// context ends.
type opaqueCtx struct {
	context.Context
	done chan struct{}
}

func (c opaqueCtx) Done() <-chan struct{} { return c.done }
func (c opaqueCtx) Value(any) any         { return nil }

func (c opaqueCtx) Err() error {
	if isDone(c.done) {
		return context.Canceled
	}
	return nil
}

// SleepContext stops its watch on the context when d ends the sleep: many
// sleeps on a context that never ends leave no goroutine behind.
// (TestSleepContextDeterministic checks that no timer or watch stays
// registered, where the virtual clock makes that exact.)
func TestSleepContextNoLeak(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	ctx := opaqueCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(ctx.done)
	base := goroutines.Settled()
	const n = 50
	vts := make([]*VThread, 0, n)
	for range n {
		vts = append(vts, goOrFatal(t, s, func(context.Context) error {
			return SleepContext(ctx, 100*time.Microsecond)
		}))
	}
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	if got := goroutines.Settled(); got > base {
		t.Errorf("%d goroutines after %d SleepContexts that d ended, %d before: their context watches were left running", got, n, base)
	}

}
