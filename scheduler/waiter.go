package scheduler

import (
	"context"
	"sync/atomic"
	"time"
)

// The synchronisation types (mutex.go, cond.go, waitgroup.go,
// semaphore.go) and Chan keep their waiters in a queue guarded by a
// short internal sync.Mutex. It is held only while the queue and the
// type's state change, never while anyone waits. A waiter is queued
// under the lock, the lock is released, and only then does the waiter
// park (a virtual thread) or block (a plain goroutine). The side that
// releases the waiter takes it off the queue under the lock and wakes
// it. A wake-up that comes before the park is not lost: the virtual
// thread's permit, or the goroutine's buffered channel, keeps it.

// A waiter is one party blocked until something happens: a virtual
// thread, which parks, or a plain goroutine, which blocks on a channel.
// The synchronisation types queue waiters. Whoever makes the awaited
// thing happen calls wake. A waiter wakes once: by wake, or by its
// timeout.
type waiter struct {
	vt    *VThread
	ch    chan struct{}
	state atomic.Int32 // waiting, woken, timedOut
	next  *waiter      // in a wait queue

	ok    bool // Mutex: the lock was handed over (handoff mode)
	index int  // Select: the case that won
}

const (
	waiting int32 = iota
	woken
	timedOut
)

// newWaiter returns a waiter for the calling virtual thread or goroutine.
func newWaiter() *waiter {
	w := new(waiter)
	w.init()
	return w
}

// init makes w, a zero waiter, the calling virtual thread's or
// goroutine's. It is for a waiter that lives inside what it waits on,
// such as a channel operation's node, which saves an allocation.
func (w *waiter) init() {
	if vt := Current(); vt != nil {
		w.vt = vt
	} else {
		w.ch = make(chan struct{}, 1)
	}
}

// wake wakes w if it is still waiting, and reports whether it did.
func (w *waiter) wake() bool {
	if !w.state.CompareAndSwap(waiting, woken) {
		return false
	}
	w.signal()
	return true
}

// claimed wakes w, which its waker has just moved from waiting to woken.
// w is a Chan's node of select case index; -1 means not a select's. It
// is wake's signal, for the wake-up of a parked partner on the path of
// every Chan hand-off. A select's winning case is recorded before the
// wake-up. The select reads it under the channel's lock, which its waker
// holds.
func (w *waiter) claimed(index int) {
	if index >= 0 {
		w.index = index
	}
	if vt := w.vt; vt != nil {
		vt.unparkClaimed()
	} else {
		w.ch <- struct{}{}
	}
}

// signal wakes w, which its caller has just moved from waiting to woken
// or timedOut. It wakes a virtual thread by unparkClaimed; its wait
// (wait, waitFor) ends on w's state. It wakes a goroutine by its channel.
func (w *waiter) signal() {
	if w.vt != nil {
		w.vt.unparkClaimed()
	} else {
		w.ch <- struct{}{}
	}
}

// wait blocks until w is woken.
func (w *waiter) wait() {
	if w.vt != nil {
		w.parkUntilWoken()
		return
	}
	<-w.ch
}

// waitFor blocks until w's wait ends, by a wake or once d has passed. It
// reports whether it was woken. A virtual thread measures d by the
// scheduler's clock. d < 0 waits for ever, for an end that something
// else may bring, such as a context. It then reports true, and the
// caller reads w's state.
func (w *waiter) waitFor(d time.Duration) bool {
	if d < 0 {
		w.wait()
		return true
	}
	expire := func() {
		if w.state.CompareAndSwap(waiting, timedOut) {
			w.signal()
		}
	}
	var t Stopper
	if w.vt != nil {
		t = w.vt.s.afterFunc(d, expire)
	} else {
		t = time.AfterFunc(d, expire)
	}
	if w.vt != nil {
		w.parkUntilWoken()
	} else {
		<-w.ch
	}
	t.Stop()
	return w.state.Load() == woken
}

// expire ends w's wait the way its timeout does, unless w has been
// woken first. It reports whether it did. Context cancellation uses it.
func expire(w *waiter) bool {
	if w.state.CompareAndSwap(waiting, timedOut) {
		w.signal()
		return true
	}
	return false
}

// await blocks until w is woken, ctx ends or d passes, and reports
// whether w was woken. ctx may be nil; d < 0 means no timeout. Whoever
// wakes w has finished with it. A wait that ended otherwise may still
// find w queued.
func await(w *waiter, ctx context.Context, d time.Duration) bool {
	if w.vt != nil && d < 0 && (ctx == nil || ctx.Done() == nil) {
		return w.parkUntilWoken()
	}
	var stop func() bool
	if ctx != nil && ctx.Done() != nil {
		if w.vt != nil {
			stop = w.vt.s.watchContext(ctx, func() { expire(w) })
		} else {
			stop = context.AfterFunc(ctx, func() { expire(w) })
		}
	}
	w.waitFor(d)
	if stop != nil {
		stop()
	}
	// Not waitFor's result: with d < 0 it does not expect expire.
	return w.state.Load() == woken
}

// waitList is a FIFO queue of waiters linked through waiter.next.
type waitList struct {
	head, tail *waiter
}

func (l *waitList) empty() bool { return l.head == nil }

func (l *waitList) pushBack(w *waiter) {
	w.next = nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
}

func (l *waitList) pushFront(w *waiter) {
	w.next = l.head
	l.head = w
	if l.tail == nil {
		l.tail = w
	}
}

func (l *waitList) popFront() *waiter {
	w := l.head
	if w == nil {
		return nil
	}
	l.head = w.next
	if l.head == nil {
		l.tail = nil
	}
	w.next = nil
	return w
}

// remove takes w out of the list, and reports whether it was there. It
// walks the list, so it is for the rare paths only.
func (l *waitList) remove(w *waiter) bool {
	var prev *waiter
	for x := l.head; x != nil; prev, x = x, x.next {
		if x != w {
			continue
		}
		if prev == nil {
			l.head = x.next
		} else {
			prev.next = x.next
		}
		if l.tail == x {
			l.tail = prev
		}
		x.next = nil
		return true
	}
	return false
}

// takeAll empties the list and returns its waiters, still linked
// through next. wakeChain wakes such a chain.
func (l *waitList) takeAll() *waiter {
	w := l.head
	l.head, l.tail = nil, nil
	return w
}

func wakeChain(w *waiter) {
	for w != nil {
		next := w.next
		w.next = nil
		w.wake()
		w = next
	}
}

// clockNow is the clock a waiter measures its wait with. A virtual
// thread uses the scheduler's, virtual in deterministic mode. So
// behaviour that depends on how long something waited stays
// reproducible. A goroutine uses the wall clock.
func clockNow(w *waiter) time.Time {
	if w.vt != nil {
		return w.vt.s.Now()
	}
	return time.Now()
}
