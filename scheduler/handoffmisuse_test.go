package scheduler

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
			// A call that yields: a loop without one is never preempted under
			// GODEBUG=gccheckmark=1, and a collection would wait for it for ever.
			runtime.Gosched()
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
// locked on the first waiter's behalf. A second Unlock must panic, not
// unlock that waiter's lock unnoticed and let two holders inside.
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
// the next waiting writer. A second Unlock must panic, not unlock that
// writer's lock unnoticed.
func TestRWMutexUnlockTwiceWithWriterWaiting(t *testing.T) {
	var rw RWMutex
	handOffAndUnlockAgain(t, rw.Lock, rw.Unlock, rw.TryLock,
		func() bool { rw.mu.Lock(); defer rw.mu.Unlock(); return !rw.wq.empty() },
		"Unlock of unlocked RWMutex")
}

// TestNilChanPanicsClearly: Send, Recv, Close and their variants on a nil
// *Chan panic with a message that names the mistake, from a goroutine and
// from a virtual thread (they were a nil pointer dereference inside the
// lock); Len and Cap are 0, as for a nil Go channel, and a Select case of
// one is never ready.
func TestNilChanPanicsClearly(t *testing.T) {
	var c *Chan[int]
	ops := map[string]func(){
		"Send":        func() { c.Send(1) },
		"TrySend":     func() { c.TrySend(1) },
		"SendTimeout": func() { c.SendTimeout(1, time.Millisecond) },
		"SendContext": func() { c.SendContext(context.Background(), 1) },
		"Recv":        func() { c.Recv() },
		"TryRecv":     func() { c.TryRecv() },
		"RecvTimeout": func() { c.RecvTimeout(time.Millisecond) },
		"RecvContext": func() { c.RecvContext(context.Background()) },
		"All": func() {
			for range c.All() {
			}
		},
		"Close": func() { c.Close() },
	}
	check := func(where string) {
		for name, op := range ops {
			if msg := mustPanic(t, op); !strings.Contains(msg, "nil *Chan") {
				t.Errorf("%s: %s on a nil *Chan panicked with %q, want a message about a nil *Chan", where, name, msg)
			}
		}
		if c.Len() != 0 || c.Cap() != 0 {
			t.Errorf("%s: a nil *Chan has Len %d, Cap %d; want 0, 0", where, c.Len(), c.Cap())
		}
		if i, _ := TrySelect(RecvCase(c, nil), SendCase(c, 1)); i != -1 {
			t.Errorf("%s: TrySelect over cases of a nil *Chan chose %d, want none (-1)", where, i)
		}
	}
	check("goroutine")
	s := newSched(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(context.Context) error {
		check("virtual thread")
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}

// TestAfterFuncNilPanics: AfterFunc with a nil f panics at the call, in
// both modes, rather than when the timer fires (in real mode, in a
// goroutine of its own, ending the program).
func TestAfterFuncNilPanics(t *testing.T) {
	for _, det := range []bool{false, true} {
		s := newSched(t, Options{Carriers: 1, Deterministic: det})
		if msg := mustPanic(t, func() { s.AfterFunc(time.Hour, nil) }); !strings.Contains(msg, "nil function") {
			t.Errorf("deterministic=%v: AfterFunc(d, nil) panicked with %q, want a message about a nil function", det, msg)
		}
	}
}
