package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newSched is newTest whose cleanup does not hang for ever when a failing
// test leaves virtual threads blocked: it reports them and moves on.
func newSched(t *testing.T, opts Options) *Scheduler {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Shutdown hung: %d virtual threads still blocked", s.Live())
		}
	})
	return s
}

// waitDone fails the test if done is not closed within d.
func waitDone(t *testing.T, done <-chan struct{}, d time.Duration, what string) bool {
	t.Helper()
	select {
	case <-done:
		return true
	case <-time.After(d):
		t.Errorf("%s: not done after %v (a lost wake-up?)", what, d)
		return false
	}
}

// mixed runs fn(i) for i in [0, nv) in virtual threads of s and for i in
// [nv, nv+ng) in plain goroutines, and waits for them all.
func mixed(t *testing.T, s *Scheduler, nv, ng int, fn func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(nv + ng)
	for i := range nv {
		if _, err := s.Go(func(context.Context) error {
			defer wg.Done()
			fn(i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ng {
		go func() {
			defer wg.Done()
			fn(nv + i)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if !waitDone(t, done, 60*time.Second, "workers") {
		t.FailNow()
	}
}

// pause gives others a chance to run: a virtual thread yields, and every
// few calls a goroutine sleeps.
func pause(i int) {
	if Current() != nil || i%4 != 0 {
		Yield()
	} else {
		time.Sleep(time.Microsecond)
	}
}

func iters(long, short int) int {
	if testing.Short() || raceEnabled {
		return short
	}
	return long
}

// mustPanic calls f and returns the message it panicked with, failing the
// test if it did not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Errorf("did not panic")
			return
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

// carrierFree checks that a virtual thread blocked in block leaves the only
// carrier free: another virtual thread must run meanwhile. release unblocks
// it; it runs on the test goroutine.
func carrierFree(t *testing.T, block func(), release func()) {
	t.Helper()
	s := newSched(t, Options{Carriers: 1, MaxCompensation: -1})
	var started, finished atomic.Bool
	a, _ := s.Go(func(context.Context) error {
		started.Store(true)
		block()
		finished.Store(true)
		return nil
	})
	for !started.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(2 * time.Millisecond)
	ran := make(chan struct{})
	b, _ := s.Go(func(context.Context) error {
		close(ran)
		return nil
	})
	ok := waitDone(t, ran, 5*time.Second, "a second virtual thread on the one carrier")
	if ok && finished.Load() {
		t.Errorf("the blocking operation did not block")
	}
	release()
	done := make(chan struct{})
	go func() { a.Join(); b.Join(); close(done) }()
	waitDone(t, done, 5*time.Second, "released virtual thread")
}

func TestSyncCarrierFree(t *testing.T) {
	t.Run("Mutex", func(t *testing.T) {
		var m Mutex
		m.Lock()
		carrierFree(t, func() { m.Lock(); m.Unlock() }, m.Unlock)
	})
	t.Run("RWMutex.Lock", func(t *testing.T) {
		var m RWMutex
		m.RLock()
		carrierFree(t, func() { m.Lock(); m.Unlock() }, m.RUnlock)
	})
	t.Run("RWMutex.RLock", func(t *testing.T) {
		var m RWMutex
		m.Lock()
		carrierFree(t, func() { m.RLock(); m.RUnlock() }, m.Unlock)
	})
	t.Run("WaitGroup", func(t *testing.T) {
		var wg WaitGroup
		wg.Add(1)
		carrierFree(t, wg.Wait, wg.Done)
	})
	t.Run("Cond", func(t *testing.T) {
		var m Mutex
		c := NewCond(&m)
		ready := false
		carrierFree(t, func() {
			m.Lock()
			for !ready {
				c.Wait()
			}
			m.Unlock()
		}, func() {
			m.Lock()
			ready = true
			c.Signal()
			m.Unlock()
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		sem := NewSemaphore(1)
		sem.Acquire(context.Background(), 1)
		carrierFree(t, func() {
			if err := sem.Acquire(context.Background(), 1); err != nil {
				t.Error(err)
			}
		}, func() { sem.Release(1) })
	})
}
