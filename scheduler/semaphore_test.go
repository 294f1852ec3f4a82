package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSemaphoreLimit(t *testing.T) {
	s := newSched(t, Options{})
	sem := NewSemaphore(3)
	var inside, most atomic.Int32
	mixed(t, s, 24, 6, func(id int) {
		for i := range iters(200, 50) {
			if err := sem.Acquire(context.Background(), 1); err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			pause(i)
			inside.Add(-1)
			sem.Release(1)
		}
	})
	if most.Load() > 3 {
		t.Fatalf("%d holders at once, limit 3", most.Load())
	}
	if !sem.TryAcquire(3) {
		t.Fatal("tokens leaked")
	}
	if sem.TryAcquire(1) {
		t.Fatal("TryAcquire beyond the size succeeded")
	}
	sem.Release(3)
	if msg := mustPanic(t, func() { sem.Release(1) }); !strings.Contains(msg, "more tokens than held") {
		t.Fatalf("panic %q", msg)
	}
}

func TestSemaphoreCancel(t *testing.T) {
	s := newSched(t, Options{})
	sem := NewSemaphore(2)
	if err := sem.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	// Blocked Acquires, in a virtual thread and a goroutine, end with
	// their contexts.
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	s.Go(func(context.Context) error { errs <- sem.Acquire(ctx, 1); return nil })
	go func() { errs <- sem.Acquire(ctx, 1) }()
	time.Sleep(5 * time.Millisecond)
	cancel()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled Acquire did not return")
		}
	}
	// A deadline in a virtual thread.
	vt, _ := s.Go(func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		return sem.Acquire(ctx, 1)
	})
	if err := vt.Join(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want DeadlineExceeded", err)
	}
	// An already cancelled context fails even when tokens are free.
	sem.Release(2)
	if err := sem.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a done context = %v", err)
	}
	// No token leaked.
	if !sem.TryAcquire(2) {
		t.Fatal("tokens leaked by cancelled Acquires")
	}
	// A cancelled large request at the head lets a smaller one behind it
	// through.
	big, cancelBig := context.WithCancel(context.Background())
	bigErr := make(chan error, 1)
	s.Go(func(context.Context) error { bigErr <- sem.Acquire(big, 2); return nil })
	time.Sleep(5 * time.Millisecond)
	small := make(chan error, 1)
	s.Go(func(context.Context) error { small <- sem.Acquire(context.Background(), 1); return nil })
	time.Sleep(5 * time.Millisecond)
	sem.Release(1)
	select {
	case <-small:
		t.Fatal("a small request overtook a larger one at the head")
	case <-time.After(5 * time.Millisecond):
	}
	cancelBig()
	if err := <-bigErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("big Acquire = %v", err)
	}
	select {
	case err := <-small:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the small request stayed blocked behind a cancelled one")
	}
	sem.Release(2)
	// A request larger than the semaphore waits for its context.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel2()
	if err := sem.Acquire(ctx2, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("oversized Acquire = %v", err)
	}
}

// A grant that races with the waiter's context ending: Acquire returns
// ctx.Err() and gives the tokens back, waking the waiter behind it, as
// golang.org/x/sync/semaphore does; it does not keep them and return nil.
//
// Deterministic mode forces the race: a context cancelled by a virtual
// thread is seen by the waits on it at the carrier's next scheduling
// decision (watchContext), so a thread that cancels the waiter's context
// and then releases, in one run, grants the tokens to a waiter whose
// context has already ended.
func TestSemaphoreGrantRacesCancel(t *testing.T) {
	for seed := range uint64(8) {
		s := newSched(t, Options{Deterministic: true, Seed: seed})
		sem := NewSemaphore(2)
		if !sem.TryAcquire(2) {
			t.Fatal("TryAcquire on a new semaphore failed")
		}
		ctx, cancel := context.WithCancel(context.Background())
		var errCancelled, errBehind error
		root := goOrFatal(t, s, func(context.Context) error {
			// Started from a virtual thread, so that the carrier runs
			// none before all have started.
			cancelled, err := s.Go(func(context.Context) error {
				errCancelled = sem.Acquire(ctx, 2)
				if errCancelled == nil {
					sem.Release(2)
				}
				return nil
			})
			if err != nil {
				return err
			}
			behind, err := s.Go(func(context.Context) error {
				Sleep(time.Millisecond) // queued behind the first
				errBehind = sem.Acquire(context.Background(), 1)
				if errBehind == nil {
					sem.Release(1)
				}
				return nil
			})
			if err != nil {
				return err
			}
			releaser, err := s.Go(func(context.Context) error {
				Sleep(2 * time.Millisecond) // both are queued
				cancel()
				sem.Release(2) // granted to the first, whose ctx has ended
				return nil
			})
			if err != nil {
				return err
			}
			for _, vt := range []*VThread{cancelled, behind, releaser} {
				if err := vt.Join(); err != nil {
					return err
				}
			}
			return nil
		})
		if err := joinWithin(t, root); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(errCancelled, context.Canceled) {
			t.Errorf("seed %d: Acquire granted as its context ended = %v, want context.Canceled", seed, errCancelled)
		}
		if errBehind != nil {
			t.Errorf("seed %d: the Acquire behind it = %v, want nil", seed, errBehind)
		}
		if !sem.TryAcquire(2) {
			t.Errorf("seed %d: TryAcquire(2) failed after every holder released: tokens lost", seed)
		} else {
			sem.Release(2)
		}
	}
}

// The same race outside deterministic mode, for a waiting virtual thread
// and a waiting goroutine: a context cancelled before the Release that
// grants the tokens fails the Acquire, whichever wins the race to end its
// wait (the grant, which the Acquire then undoes, or the context), and no
// token is lost.
func TestSemaphoreCancelBeforeRelease(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	for round := range 100 {
		sem := NewSemaphore(1)
		if !sem.TryAcquire(1) {
			t.Fatal("TryAcquire on a new semaphore failed")
		}
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		if round%2 == 0 {
			go func() { res <- sem.Acquire(ctx, 1) }()
		} else if _, err := s.Go(func(context.Context) error { res <- sem.Acquire(ctx, 1); return nil }); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the Acquire to queue", func() bool {
			sem.mu.Lock()
			defer sem.mu.Unlock()
			return sem.head != nil
		})
		cancel()
		sem.Release(1)
		select {
		case err := <-res:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: Acquire whose context was cancelled before the Release = %v, want context.Canceled", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Acquire did not return", round)
		}
		if !sem.TryAcquire(1) {
			t.Fatalf("round %d: TryAcquire(1) failed after the cancelled Acquire returned: a token lost", round)
		}
	}
}
