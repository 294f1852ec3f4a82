package scheduler

import (
	"runtime"

	"github.com/weftrt/weft"
)

// The park/unpark protocol. A virtual thread has a permit and a state.
// A park takes the permit if it is there, or yields with actPark; the
// carrier then stores vtParked and loads the permit. An unpark stores the
// permit, then swaps the state from vtParked to vtQueued. Either the
// carrier's load sees the permit or the unpark's swap sees vtParked. The
// carrier swaps too, so exactly one of them queues the thread.

// Park parks the calling virtual thread until Unpark is called for it.
// It follows java.util.concurrent.locks.LockSupport: Unpark makes a
// permit available and Park consumes it. So an Unpark before the Park is
// not lost. Park may also return spuriously; callers re-check their
// condition in a loop. Called from a plain goroutine it panics.
//
// The package's own waits (Join, Wait, Chan, Mutex, Cond and the rest)
// park on the same permit. As in Java's locks, an Unpark that comes while
// the thread waits in one of them is used up there. The wait looks at
// its condition again and parks on, and the next Park does not see it.
// Sleep and SleepContext keep it for the next Park.
//
// A virtual thread with a pinned stack cannot be suspended: a cgo
// callback, pinning.Do, a reflect.MakeFunc function. Park then blocks
// its carrier instead, and the scheduler may start an extra carrier
// meanwhile.
func Park() {
	var vt *VThread // Current, with currentIn inline
	if k := weft.Innermost(); k != nil {
		vt = currentIn(k)
	}
	if vt == nil {
		parkOutside()
	}
	// Must match VThread.park (TestParkCopiesMatch). It is a copy, so
	// every virtual thread parked here freezes one frame less.
	if vt.permit.Load() && vt.permit.CompareAndSwap(true, false) {
		return
	}
	vt.action = actPark
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		parkPinned(perr)
	}
	vt.permit.CompareAndSwap(true, false)
}

// parkOutside panics for Park called outside a virtual thread. Every
// virtual thread parked in Park has its frame frozen. A panic in Park
// itself would give that frame an argument area for the panic's
// two-word value.
//
//go:noinline
func parkOutside() {
	panic("scheduler.Park: not called from a virtual thread")
}

// park is Park for vt, the calling virtual thread.
func (vt *VThread) park() {
	if vt.permit.Load() && vt.permit.CompareAndSwap(true, false) {
		return
	}
	vt.action = actPark
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		parkPinned(perr)
	}
	vt.permit.CompareAndSwap(true, false)
}

// parkKeep is park without taking the permit after a wake-up. An Unpark
// that came while vt was queued stays for its caller to see.
func (vt *VThread) parkKeep() {
	vt.action = actPark
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		parkPinned(perr)
	}
}

// Unpark makes the permit of vt available and, if vt is parked, makes it
// runnable. It may be called from any goroutine or virtual thread.
func (vt *VThread) Unpark() {
	if vt == nil {
		nilVThread("Unpark")
	}
	vt.unparkOn(nil)
}

// unparkOn is Unpark called by carrier c itself, outside any virtual
// thread, or by anyone else with c nil. c queues vt if it makes it
// runnable.
func (vt *VThread) unparkOn(c *carrier) {
	vt.permit.Store(true)
	switch {
	case vt.state.CompareAndSwap(vtParked, vtQueued):
		vt.enqueue(c)
	case vt.state.CompareAndSwap(vtPinned, vtRunning):
		// vt waits in parkPinned for this, on its carrier. It cannot
		// leave the carrier before it has it.
		vt.carrier.pinned <- struct{}{}
	}
}

// unparkClaimed wakes vt for a waiter of its that the caller has just
// claimed: moved from waiting to woken or timedOut. vt waits in a loop
// that ends on the waiter's state (parkUntilWoken and its copies). So it
// needs the wake-up, not the permit. If vt is parked, the swap to
// vtQueued makes it runnable without the permit. Otherwise vt runs and
// may be about to park, or is blocked pinned. The wake-up is then
// Unpark's, permit first. Sleep waits on no waiter: its wakers set the
// permit only while it runs. sendWait and recvWait have copies of it
// (TestParkCopiesMatch).
func (vt *VThread) unparkClaimed() {
	if vt.state.CompareAndSwap(vtParked, vtQueued) {
		vt.enqueue(nil)
	} else {
		vt.unparkOn(nil)
	}
}

// Yield lets other runnable virtual threads run before the caller goes on.
// From a plain goroutine it calls runtime.Gosched.
//
// A pinned virtual thread cannot be suspended, so it keeps its carrier:
// pinning.Do, a cgo callback, its thread locked. Yield then counts the
// pin in Pins and calls runtime.Gosched. The others run meanwhile only
// on other carriers. Unlike a pinned park, a pinned Yield starts no
// compensation carrier. So with one carrier, or every other one busy, a
// loop that yields while pinned, waiting for another virtual thread,
// waits for ever. Park instead (a Chan, a WaitGroup, Park): that blocks
// the carrier and lets a compensation carrier run the others.
func Yield() {
	vt := Current()
	if vt == nil {
		runtime.Gosched()
		return
	}
	vt.action = actYield
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		vt.s.countPin(perr)
		// What vt queued on its carrier, which it keeps, must not wait
		// for the monitor. An idle carrier is woken for it now, as a
		// pinned park does.
		vt.carrier.payOwed()
		start := vt.s.pinStart()
		runtime.Gosched()
		vt.s.pinEnd(vt, perr, false, start, nil)
	}
}

// parkUntilWoken parks w's virtual thread until w's wait ends. It
// reports whether it was woken, not timed out. It is the park loop, with
// VThread.park written out. Every frame under a park is frozen with it,
// so the loop's frame is the only one between its caller and the yield.
// sendWait and recvWait (chan.go) have copies of the loop, so nothing is
// between them and the yield (TestParkCopiesMatch).
//
// Only w is live across the yield; w.vt is read again after it. The
// capture publishes and the thaw restores each live pointer. After the
// park it clears the permit, using up an Unpark that came during the
// wait. It loads the permit first. unparkClaimed sets none for a parked
// thread, so the permit is usually clear. A load is cheaper than a
// compare-and-swap that fails.
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
		if w.vt.permit.Load() {
			w.vt.permit.CompareAndSwap(true, false)
		}
	}
	return w.state.Load() == woken
}
