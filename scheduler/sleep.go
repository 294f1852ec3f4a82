package scheduler

import (
	"context"
	"sync/atomic"
	"time"
)

// wakeTimer is a Sleep timer's wake-up. With fired nil, it is
// SleepContext's context watch's; isDone tells. It sets fired. If vt is
// parked, it makes vt runnable without the permit. Otherwise vt runs, and
// may be about to park: it wakes vt through the permit, as Unpark does.
// So the permit stands for other Unparks only, which the sleep keeps for
// the next Park.
func (vt *VThread) wakeTimer(fired *atomic.Bool) {
	if fired != nil {
		fired.Store(true)
	}
	switch {
	case vt.state.CompareAndSwap(vtParked, vtQueued):
		if profiling.Load() != 0 {
			vt.s.profWake(vt) // profiling.go
		}
		vt.s.readyOn(vt, vt.s.runningCarrier())
	case vt.state.CompareAndSwap(vtPinned, vtRunning):
		vt.carrier.pinned <- struct{}{}
	default:
		vt.Unpark()
	}
}

// Sleep pauses the calling virtual thread for at least d, by the
// scheduler's clock: virtual in deterministic mode. An Unpark that comes
// before or during it does not end it, and is not lost: the next Park
// returns at once. Nor does cancelling a context end it: SleepContext is
// the Sleep that one can end. From a plain goroutine it calls time.Sleep.
//
// Outside deterministic mode, the timer may fire while the thread is not
// parked. d may be shorter than the thread takes to park, or the timer
// may fire just as the sleep ends. It then wakes the thread through its
// permit, as Unpark does. So the thread may be left unparked once after
// Sleep returns: the next Park may then return spuriously, as Park may.
func Sleep(d time.Duration) {
	vt := Current()
	if vt == nil {
		time.Sleep(d)
		return
	}
	if d <= 0 {
		Yield()
		return
	}
	vt.sleepUntil(d, nil)
}

// sleepUntil parks vt until its timer for d has fired or done is closed.
// done is a context's Done channel, nil for none. Whoever closes it must
// wake vt with wakeTimer. Sleep and SleepContext share it.
func (vt *VThread) sleepUntil(d time.Duration, done <-chan struct{}) {
	var fired atomic.Bool
	t := vt.s.afterFunc(d, func() { vt.wakeTimer(&fired) })
	woken := false
	for !fired.Load() && !isDone(done) { // the timer fires once d has passed
		// A permit here is neither the timer's nor done's. They wake
		// by state, or set the permit only while vt runs, after their
		// flag. Take it and remember to give it back.
		if vt.permit.Load() && vt.permit.CompareAndSwap(true, false) {
			woken = true
			continue
		}
		vt.parkKeep()
	}
	t.Stop()
	if woken {
		// Give it back, as Loom's sleep does. A Park after the sleep
		// then returns at once, not missing that wake-up. Park may
		// return spuriously, so a caller loses nothing if it was the
		// timer's after all.
		vt.permit.Store(true)
	}
}

// SleepContext is Sleep that ctx can end. It pauses the calling virtual
// thread until d has passed, and returns nil; or until ctx ends, and
// returns ctx.Err(); whichever comes first. d is by the scheduler's
// clock: virtual in deterministic mode. A ctx that has already ended
// returns ctx.Err() at once, without a yield. Closing the scheduler, or
// a Shutdown whose context ends, cancels every virtual thread's context.
// A thread sleeping on its own context wakes then. Sleep would keep
// Close waiting for the rest of its sleep.
//
// If d passes and ctx ends at about the same time, ctx wins. SleepContext
// looks at ctx once more when it wakes and returns ctx.Err() if it has
// ended, even if d has passed too. So it returns nil only if d has
// passed and ctx had not ended when the sleep ended. It never returns
// nil before d has passed. In deterministic mode, let the sleep be due
// at virtual time T and another virtual thread cancel ctx at T. The
// result then depends on which of the two the seed runs first.
//
// As with Sleep, an Unpark that comes before or during the sleep does
// not end it and is not lost: the next Park returns at once. When it
// returns, SleepContext has stopped its timer and its watch on ctx.
// Nothing stays registered. A timer or watch that fires just as the
// sleep ends may still unpark the thread once after it returns. The
// next Park may then return spuriously, as Park may.
//
// From a plain goroutine it waits on a time.Timer and ctx.Done(). A nil
// ctx panics.
func SleepContext(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		nilContext("SleepContext")
	}
	done := ctx.Done()
	if isDone(done) {
		return ctx.Err()
	}
	vt := Current()
	if vt == nil {
		return sleepOutside(ctx, d)
	}
	if done == nil { // a context that never ends
		Sleep(d)
		return nil
	}
	if d <= 0 {
		Yield()
		if isDone(done) {
			return ctx.Err()
		}
		return nil
	}
	stop := vt.s.watchContext(ctx, func() { vt.wakeTimer(nil) })
	vt.sleepUntil(d, done)
	stop()
	if isDone(done) {
		return ctx.Err()
	}
	return nil
}

// sleepOutside is SleepContext called from a plain goroutine, ctx not
// done at the call. It blocks on a wall-clock timer. As in a virtual
// thread, ctx wins a tie.
func sleepOutside(ctx context.Context, d time.Duration) error {
	done := ctx.Done()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
	}
	if isDone(done) {
		return ctx.Err()
	}
	return nil
}

// isDone reports whether done, a context's Done channel, is closed.
// done is nil for a context that never ends.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
