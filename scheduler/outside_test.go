package scheduler

import (
	"context"
	"errors"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/internal/rt"
)

// holdWaker keeps s's waker goroutine from waking a carrier until the
// returned function is called (or the test ends). A thread that a plain
// goroutine starts then stays queued, with the carriers idle, until a
// Join runs it. Other schedulers' wakers are not held.
func holdWaker(t *testing.T, s *Scheduler) (release func()) {
	t.Helper()
	if !s.nest {
		t.Skip("a plain goroutine's Join runs nothing itself on this backend")
	}
	gate := make(chan struct{})
	f := func(w *Scheduler) {
		if w == s {
			<-gate
		}
	}
	testHooks.waker.Store(&f)
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(gate)
			testHooks.waker.Store(nil)
		})
	}
	t.Cleanup(release)
	return release
}

// waitIdle waits until n of s's carriers are on the idle list.
func waitIdle(t *testing.T, s *Scheduler, n int32) {
	t.Helper()
	waitUntil(t, "the carriers to go idle", func() bool { return s.nidle.Load() == n })
}

// A plain goroutine's Join of the thread it has just started, with a
// carrier idle, runs the thread on the goroutine, its thread locked where
// carriers are, with the thread's own labels. The caller's labels, lock
// and the carrier's place on the idle list are as before afterwards.
func TestJoinFromGoroutineRunsOnCaller(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	release := holdWaker(t, s)
	waitIdle(t, s, 1)
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("role", "caller"))
	pprof.SetGoroutineLabels(ctx)
	defer pprof.SetGoroutineLabels(context.Background())
	mine := profLabel()
	caller := goroutineID()
	var ran uint64
	var locked, labelled bool
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		ran = goroutineID()
		locked, _ = rt.Locked()
		labelled = profLabel() == mine // a go statement's: the caller's
		pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("role", "thread")))
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if ran != caller {
		t.Fatalf("the thread ran on goroutine %d, want the joiner's, %d", ran, caller)
	}
	if locked != s.lock {
		t.Fatalf("the thread ran with its OS thread locked: %v, want %v as the carriers", locked, s.lock)
	}
	if !labelled {
		t.Fatal("the thread did not start with the labels of the goroutine that started it")
	}
	if l, _ := rt.Locked(); l {
		t.Fatal("the joiner's OS thread is still locked after Join")
	}
	if profLabel() != mine {
		t.Fatal("the joiner's labels changed across Join")
	}
	if n := s.nidle.Load(); n != 1 {
		t.Fatalf("%d carriers idle after Join, want the borrowed one back: 1", n)
	}
	// The carrier runs threads after its loan, as ever.
	release()
	vt = goOrFatal(t, s, func(ctx context.Context) error { ran = goroutineID(); return nil })
	if err := vt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran == caller {
		t.Fatal("Wait ran the thread on the caller")
	}
}

// A plain goroutine's Join runs no thread while every carrier is busy:
// no more threads run at once than there are carriers.
func TestJoinFromGoroutineKeepsCarrierBound(t *testing.T) {
	s := newSched(t, Options{Carriers: 1, MaxCompensation: -1})
	var release, running atomic.Bool
	busy := goOrFatal(t, s, func(ctx context.Context) error {
		running.Store(true)
		for !release.Load() {
			runtime.Gosched()
		}
		running.Store(false)
		return nil
	})
	waitUntil(t, "the first thread to run", running.Load)
	go func() {
		time.Sleep(20 * time.Millisecond)
		release.Store(true)
	}()
	var overlapped bool
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		overlapped = running.Load()
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if overlapped {
		t.Fatal("Join ran the thread beside the one that held the only carrier")
	}
	if err := busy.Join(); err != nil {
		t.Fatal(err)
	}
}

// A plain goroutine's Join runs no thread that an older one waits behind
// on the global queue.
func TestJoinFromGoroutineKeepsOrder(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	release := holdWaker(t, s)
	waitIdle(t, s, 1)
	var first atomic.Bool
	older := goOrFatal(t, s, func(ctx context.Context) error { first.Store(true); return nil })
	var afterOlder bool
	vt := goOrFatal(t, s, func(ctx context.Context) error { afterOlder = first.Load(); return nil })
	go func() {
		time.Sleep(10 * time.Millisecond)
		release()
	}()
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if !afterOlder {
		t.Fatal("Join ran the thread ahead of one queued before it")
	}
	if err := older.Join(); err != nil {
		t.Fatal(err)
	}
}

// What a thread run by a plain goroutine's Join queues on its carrier
// runs: the carrier goes back to the idle list, looks, and is woken. The
// waker is held throughout, so nothing else wakes it.
func TestJoinFromGoroutineWakesForWhatItQueued(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	holdWaker(t, s)
	waitIdle(t, s, 1)
	caller := goroutineID()
	var child *VThread
	var onCaller bool
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		onCaller = goroutineID() == caller
		var err error
		child, err = s.Go(func(ctx context.Context) error { return nil })
		return err
	})
	if err := parent.Join(); err != nil {
		t.Fatal(err)
	}
	if !onCaller {
		t.Fatal("Join did not run the parent on the caller: the test tests nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := child.Wait(ctx); err != nil {
		t.Fatalf("the child the parent queued on the borrowed carrier: %v", err)
	}
}

// A thread that a plain goroutine's Join runs, and that computes without
// parking, holds the borrowed carrier as it would hold a carrier: the
// monitor, parked while every carrier was idle, sees the hold, its event
// has the joiner's stack, and a compensation carrier runs what is queued
// behind it.
func TestJoinFromGoroutineHeldIsCompensated(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) }) // before Shutdown, which waits for the thread
	release := holdWaker(t, s)
	waitIdle(t, s, 1)
	waitUntil(t, "the monitor to park", func() bool { return s.monitorIdle.Load() })
	var ran, joiner atomic.Uint64
	joined := make(chan error, 1)
	go func() {
		joiner.Store(goroutineID())
		vt, err := s.Go(func(ctx context.Context) error {
			ran.Store(goroutineID())
			for !stop.Load() {
				runtime.Gosched() // computes; a call, so a collection can stop it
			}
			return nil
		})
		if err == nil {
			err = vt.Join()
		}
		joined <- err
	}()
	waitUntil(t, "the thread to run", func() bool { return ran.Load() != 0 })
	if ran.Load() != joiner.Load() {
		t.Fatalf("the thread ran on goroutine %d, not on its joiner %d", ran.Load(), joiner.Load())
	}
	release()
	behind := goOrFatal(t, s, func(ctx context.Context) error { return nil })
	if err := joinWithin(t, behind); err != nil {
		t.Fatal(err)
	}
	var ev *HeldEvent
	for _, e := range s.Held() {
		if e.Reason == HeldCarrier {
			ev = &e
		}
	}
	if ev == nil {
		t.Fatalf("no HeldCarrier event for the borrowed carrier: %v", s.Held())
	}
	if !strings.Contains(ev.Stack, "TestJoinFromGoroutineHeldIsCompensated") {
		t.Errorf("the held event's stack is not the joiner's:\n%s", ev.Stack)
	}
	stop.Store(true)
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
}

// A thread run by a plain goroutine's Join that calls runtime.Goexit ends
// that goroutine, after its deferred calls, as Join says. The thread ends
// with ErrGoexit and the carrier runs threads afterwards.
func TestJoinFromGoroutineGoexit(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	release := holdWaker(t, s)
	waitIdle(t, s, 1)
	var vt *VThread
	var returned, deferred atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer deferred.Store(true)
		var err error
		vt, err = s.Go(func(ctx context.Context) error { runtime.Goexit(); return nil })
		if err != nil {
			return
		}
		vt.Join()
		returned.Store(true)
	}()
	<-done
	if vt == nil {
		t.Fatal("Go failed")
	}
	if returned.Load() || !deferred.Load() {
		t.Fatalf("Join returned: %v; the caller's deferred call ran: %v; want false, true", returned.Load(), deferred.Load())
	}
	if err := vt.Wait(context.Background()); !errors.Is(err, ErrGoexit) {
		t.Fatalf("Wait = %v, want ErrGoexit", err)
	}
	waitIdle(t, s, 1)
	release()
	after := goOrFatal(t, s, func(ctx context.Context) error { return nil })
	if err := joinWithin(t, after); err != nil {
		t.Fatal(err)
	}
	if n := s.Live(); n != 0 {
		t.Fatalf("Live = %d after every thread ended, want 0", n)
	}
}

// Many plain goroutines start threads, some joined at once, some left to
// the carriers, while the carriers go idle and sleep between bursts.
// Every thread runs: a start from outside that no Join runs must wake a
// carrier (the waker), or its thread waits for good.
func TestGoFromGoroutinesStress(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for _, carriers := range []int{1, 2, 4} {
		s := newSched(t, Options{Carriers: carriers})
		var ran atomic.Int64
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var left []*VThread
				for i := range rounds {
					vt, err := s.Go(func(ctx context.Context) error {
						if i%3 == 0 {
							Yield()
						}
						if i%5 == 0 {
							Sleep(time.Microsecond)
						}
						ran.Add(1)
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					if (g+i)%2 == 0 {
						if err := vt.Join(); err != nil {
							t.Error(err)
						}
					} else {
						left = append(left, vt)
					}
					if i%50 == 49 {
						time.Sleep(200 * time.Microsecond) // the carriers go idle
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				for _, vt := range left {
					if err := vt.Wait(ctx); err != nil {
						t.Errorf("%d carriers: a thread started from a goroutine and not joined: %v", carriers, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if n := ran.Load(); n != int64(6*rounds) {
			t.Fatalf("%d carriers: %d of %d threads ran", carriers, n, 6*rounds)
		}
	}
}

// Plain goroutines start and join threads while the scheduler shuts
// down. Each Go either fails with ErrClosed or starts a thread that runs
// to its end. Shutdown drains them, and the carriers, the monitor and
// the waker exit.
func TestGoFromGoroutineWhileClosing(t *testing.T) {
	base := goroutines.Settled()
	for round := range 5 {
		s, err := New(Options{Carriers: 2})
		if err != nil {
			t.Fatal(err)
		}
		var started, ran atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					vt, err := s.Go(func(ctx context.Context) error { ran.Add(1); return nil })
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					started.Add(1)
					if err := vt.Join(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round+1) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		cancel()
		wg.Wait()
		if started.Load() != ran.Load() {
			t.Fatalf("round %d: %d threads started, %d ran", round, started.Load(), ran.Load())
		}
	}
	waitUntil(t, "the schedulers' goroutines to exit", func() bool { return goroutines.Settled() <= base })
}
