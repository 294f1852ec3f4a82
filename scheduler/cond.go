package scheduler

import (
	"sync"
	"sync/atomic"
)

// A Cond is a condition variable, like sync.Cond, whose Wait parks a
// calling virtual thread instead of blocking its carrier. L may be a
// *Mutex, an *RWMutex, RWMutex.RLocker() or any other sync.Locker (a
// sync.Mutex too, though a virtual thread that waits to lock that blocks
// its carrier). A Cond must not be copied after first use: go vet
// reports copies, and Wait, Signal and Broadcast of a copy made after
// first use panic, as sync.Cond's do.
type Cond struct {
	// L is held while the condition is observed or changed.
	L sync.Locker

	mu sync.Mutex
	q  waitList
	// self is the Cond's address, stored by its first use: a copy made
	// after that has its original's, and panics (sync.Cond's
	// copyChecker). A pointer, not a uintptr: a Cond that stayed on a
	// stack would move with it; storing it makes every used Cond escape
	// to the heap anyway.
	self atomic.Pointer[Cond]
}

// NewCond returns a Cond that uses l.
func NewCond(l sync.Locker) *Cond { return &Cond{L: l} }

// Wait unlocks c.L, waits until Signal or Broadcast wakes it, and locks
// c.L again before returning. The caller must hold c.L. No Signal made
// after Wait has unlocked c.L is lost. As with sync.Cond, the caller
// should re-check its condition in a loop.
func (c *Cond) Wait() {
	c.checkCopy()
	if c.L == nil {
		panic("scheduler: Cond.Wait with a nil L (make a Cond with NewCond, or set L first)")
	}
	w := newWaiter()
	c.mu.Lock()
	c.q.pushBack(w)
	c.mu.Unlock()
	c.unlockL(w)
	w.wait()
	c.L.Lock()
}

// unlockL unlocks c.L for Wait, whose waiter w is queued. If that panics
// (c.L was not locked), w leaves the queue as the panic goes on, so that
// no Signal is spent on a Wait that never waited: one that already was
// goes to the next waiter. (A function of its own, so that Wait's frame,
// which a parked virtual thread keeps, has no defer.)
func (c *Cond) unlockL(w *waiter) {
	unlocked := false
	defer func() {
		if unlocked {
			return
		}
		c.mu.Lock()
		queued := c.q.remove(w)
		c.mu.Unlock()
		if !queued {
			c.Signal()
		}
	}()
	c.L.Unlock()
	unlocked = true
}

// checkCopy panics if c is a copy of a Cond made after first use, and
// records c's address at its first use.
func (c *Cond) checkCopy() {
	if p := c.self.Load(); p != c && !(p == nil && c.self.CompareAndSwap(nil, c)) && c.self.Load() != c {
		panic("scheduler: Cond is copied (a Cond must not be copied after first use: share a *Cond)")
	}
}

// Signal wakes the longest waiting Wait, if there is one. The caller may
// but need not hold c.L.
func (c *Cond) Signal() {
	c.checkCopy()
	c.mu.Lock()
	w := c.q.popFront()
	c.mu.Unlock()
	if w != nil {
		w.wake()
	}
}

// Broadcast wakes every waiting Wait.
func (c *Cond) Broadcast() {
	c.checkCopy()
	c.mu.Lock()
	ws := c.q.takeAll()
	c.mu.Unlock()
	wakeChain(ws)
}
