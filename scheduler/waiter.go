package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/weftrt/weft"
)

// A waiter is one party blocked until something happens: a virtual thread,
// which parks, or a plain goroutine, which blocks on a channel. The
// synchronisation types queue waiters; whoever makes the awaited thing
// happen calls wake. A waiter wakes once: by wake, or by its timeout.
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
// goroutine's: for a waiter that lives inside what it waits on (a channel
// operation's node), which saves an allocation.
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

// claimed wakes w, which its waker has just claimed (moved from waiting
// to woken), for a Chan's node of select case index (-1: not a select's):
// wake's signal, for the wake-up of a parked partner on the path of
// every Chan hand-off. A select's winning case is recorded before the
// wake-up; the select reads it under the channel's lock, which its
// waker holds.
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

// signal wakes w, which its caller has just claimed (moved from waiting
// to woken or timedOut): a virtual thread by unparkClaimed, whose wait
// (wait, waitFor) ends on w's state, a goroutine by its channel.
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

// parkUntilWoken parks w's virtual thread until w's wait ends, and
// reports whether it was woken (not timed out): the park loop, with
// VThread.park written out so that the loop's frame is the only one
// between its caller and the yield (the frames under a park are frozen
// with it). chan.go's sendWait and recvWait have the whole loop written
// out, so that nothing is between them and the yield.
//
// Only w is live across the yield (w.vt is read again after it): each
// live pointer is published by the capture and restored by the thaw.
// After the park it clears the permit, using up an Unpark that came
// during the wait, with a load first: its own wake-up, unparkClaimed,
// sets no permit when the thread is parked, so it is usually clear, and
// a load costs less than a compare-and-swap that fails.
func (w *waiter) parkUntilWoken() bool {
	for w.state.Load() == waiting {
		vt := w.vt
		if vt.permit.Load() { // (not &&: in a loop it compiles to a flag and its test)
			if vt.permit.CompareAndSwap(true, false) {
				continue // a wake-up for an earlier wait: look again
			}
		}
		vt.action = actPark
		if _, perr := weft.Yield(vthreadScope); perr != nil {
			parkPinned(perr)
		}
		if p := &w.vt.permit; p.Load() {
			p.CompareAndSwap(true, false)
		}
	}
	return w.state.Load() == woken
}

// waitFor blocks until w's wait ends, by a wake or once d has passed (by
// the scheduler's clock for a virtual thread), and reports whether it was
// woken. d < 0 waits for ever, for an end that something else may bring
// (a context): it reports true, and the caller reads w's state.
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
