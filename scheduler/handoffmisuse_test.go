package scheduler

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
)

// handOffAndUnlockAgain locks through lock, queues a virtual thread in
// lock behind it on a one-carrier scheduler whose carrier another virtual
// thread keeps busy once the waiter has queued, then unlocks twice: the
// first Unlock hands the lock to the waiter, which cannot run to take it,
// so the second must panic rather than unlock the waiter's lock. The
// waiter then wakes holding the lock, and tryLock must fail until it
// unlocks.
func handOffAndUnlockAgain(t *testing.T, lock, unlock func(), tryLock func() bool, queued func() bool, want string) {
	s := newSched(t, Options{Carriers: 1})
	lock()
	var inside, release, busy atomic.Bool
	defer func() { busy.Store(false); release.Store(true) }() // on a failure too
	waiter, err := s.Go(func(context.Context) error {
		lock()
		inside.Store(true)
		for !release.Load() {
			Yield()
		}
		inside.Store(false)
		unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the waiter to queue", queued)
	hog, err := s.Go(func(context.Context) error {
		busy.Store(true)
		for busy.Load() {
			// Spins on the only carrier: the woken waiter cannot run.
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the carrier to be busy", busy.Load)
	unlock() // hands the lock to the waiter
	if msg := mustPanic(t, unlock); !strings.Contains(msg, want) {
		t.Errorf("the second Unlock panicked with %q, want %q", msg, want)
	}
	busy.Store(false)
	if err := hog.Join(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the waiter to hold the lock", inside.Load)
	if tryLock() {
		t.Fatal("TryLock succeeded while the waiter holds the lock: the extra Unlock freed it")
	}
	release.Store(true)
	if err := waiter.Join(); err != nil {
		t.Fatal(err)
	}
	if !tryLock() {
		t.Fatal("TryLock failed after the waiter unlocked")
	}
	unlock()
}

// TestMutexUnlockTwiceInHandoff: in handoff mode Unlock leaves the lock
// locked on the first waiter's behalf, so a second Unlock used to unlock
// that waiter's lock unnoticed, and two holders could then be inside.
func TestMutexUnlockTwiceInHandoff(t *testing.T) {
	var m Mutex
	handOffAndUnlockAgain(t,
		func() {
			m.Lock()
			if Current() == nil {
				// The test's own lock: put m in handoff mode, as a
				// waiter that waited 1 ms would.
				m.mu.Lock()
				m.state.Store(m.state.Load() | mutexStarving)
				m.mu.Unlock()
			}
		},
		m.Unlock, m.TryLock,
		func() bool { m.mu.Lock(); defer m.mu.Unlock(); return !m.q.empty() },
		"Unlock of unlocked Mutex")
}

// TestRWMutexUnlockTwiceWithWriterWaiting: Unlock hands the write lock to
// the next waiting writer, so a second Unlock used to unlock that writer's
// lock unnoticed.
func TestRWMutexUnlockTwiceWithWriterWaiting(t *testing.T) {
	var rw RWMutex
	handOffAndUnlockAgain(t, rw.Lock, rw.Unlock, rw.TryLock,
		func() bool { rw.mu.Lock(); defer rw.mu.Unlock(); return !rw.wq.empty() },
		"Unlock of unlocked RWMutex")
}
