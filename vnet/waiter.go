package vnet

import (
	"sync/atomic"

	"github.com/weftrt/weft/scheduler"
)

// A waiter is one party blocked until something happens: a virtual thread,
// which parks, or a plain goroutine, which blocks on a channel. It wakes
// once; whoever wakes it first wins, later wakes do nothing.
//
// The functions that call wait have no defer statements and are ordinary
// Go code, so a virtual thread that parks in them can be suspended on the
// stack-copying backend instead of pinning its carrier.
type waiter struct {
	vt    *scheduler.VThread
	ch    chan struct{}
	woken atomic.Bool
}

// newWaiter returns a waiter for the calling virtual thread or goroutine.
func newWaiter() *waiter {
	if vt := scheduler.Current(); vt != nil {
		return &waiter{vt: vt}
	}
	return &waiter{ch: make(chan struct{}, 1)}
}

// wake wakes w if nothing has yet.
func (w *waiter) wake() {
	if !w.woken.CompareAndSwap(false, true) {
		return
	}
	if w.vt != nil {
		w.vt.Unpark()
	} else {
		w.ch <- struct{}{}
	}
}

// wait blocks until w is woken. A virtual thread parks, looping because
// Park may return spuriously or on a permit left by an earlier Unpark.
func (w *waiter) wait() {
	if w.vt != nil {
		for !w.woken.Load() {
			scheduler.Park()
		}
		return
	}
	<-w.ch
}

// wakeAll wakes each waiter of ws.
func wakeAll(ws []*waiter) {
	for _, w := range ws {
		w.wake()
	}
}
