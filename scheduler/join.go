package scheduler

import "context"

// Done returns a channel closed when the virtual thread has finished.
func (vt *VThread) Done() <-chan struct{} {
	if vt == nil {
		nilVThread("Done")
	}
	vt.joinMu.Lock()
	defer vt.joinMu.Unlock()
	r := vt.rareLocked()
	if r.done == nil {
		r.done = make(chan struct{})
		if vt.ended {
			close(r.done)
		}
	}
	return r.done
}

// finished reports whether the virtual thread has finished. If it has,
// vt.err is final.
func (vt *VThread) finished() bool { return vt.state.Load() == vtDone }

// Join waits for the virtual thread to finish. It returns the error its
// function returned, a *PanicError if it panicked, or ErrGoexit. Called
// from a virtual thread it parks; from a goroutine it blocks.
//
// Join may run vt itself, inside the caller, as a fork/join pool runs a
// queued subtask in its join. It does so only on the stack-copying
// backend, outside deterministic mode, when the caller is not inside a
// continuation of its own making (a continuation.Pull, say), and when
// either:
//   - the caller is a virtual thread and vt is one of the last queued
//     on the caller's carrier. vt runs on that carrier. This saves
//     parking and resuming the caller.
//   - the caller is a plain goroutine not locked to its OS thread, no
//     carrier is bound to a CPU, vt is the oldest thread on the
//     scheduler's global queue, and a carrier is idle. The caller runs
//     vt as that carrier, its thread locked meanwhile if carriers are.
//     This saves waking a carrier on another OS thread, and that
//     thread's readying the caller.
//
// vt runs until it finishes or parks. Stack traces taken in vt then show
// the caller's frames under vt's. Otherwise only runtime.Goexit tells the
// two apart. It ends the goroutine, so a Goexit in vt run inside the
// caller ends the caller too. For a virtual thread, both end with
// ErrGoexit. In either case the caller's deferred calls run. Wait never
// runs vt itself: use it where a Goexit in vt must leave the caller
// running.
func (vt *VThread) Join() error {
	if vt == nil {
		nilVThread("Join")
	}
	if vt.finished() {
		return vt.err
	}
	if cur, top := currentTop(); cur != nil {
		if cur == vt {
			panic("scheduler: a virtual thread cannot Join itself")
		}
		if top && runNested(cur, vt) && vt.finished() {
			return vt.err
		}
		vt.joinMu.Lock()
		switch {
		case vt.ended:
			vt.joinMu.Unlock()
		case vt.joiner == nil:
			vt.joiner = cur
			vt.joinMu.Unlock()
			// finish unparks cur once vt is done; a wake-up from
			// elsewhere is spurious.
			for !vt.finished() {
				cur.park()
			}
		default:
			w := newWaiter()
			r := vt.rareLocked()
			w.next, r.joinq = r.joinq, w
			vt.joinMu.Unlock()
			w.wait()
		}
		return vt.err
	}
	if vt.s.runOutside(vt) && vt.finished() {
		return vt.err
	}
	<-vt.Done()
	return vt.err
}

// addJoiner queues a waiter for the calling virtual thread on vt's end.
// It returns nil if vt has already finished.
func (vt *VThread) addJoiner() *waiter {
	vt.joinMu.Lock()
	defer vt.joinMu.Unlock()
	if vt.ended {
		return nil
	}
	w := newWaiter()
	r := vt.rareLocked()
	w.next, r.joinq = r.joinq, w
	return w
}

// dropJoiner takes w off vt's joiners if its wait ended before vt did.
// Otherwise finish takes them all off.
func (vt *VThread) dropJoiner(w *waiter) {
	vt.joinMu.Lock()
	for p := &vt.rareLocked().joinq; *p != nil; p = &(*p).next {
		if *p == w {
			*p, w.next = w.next, nil
			break
		}
	}
	vt.joinMu.Unlock()
}

// Wait is Join with a context: it returns ctx.Err() if ctx ends first.
// Unlike Join, it never runs vt inside the caller. A virtual thread that
// waits for itself panics, as Join does, and so does a nil ctx.
func (vt *VThread) Wait(ctx context.Context) error {
	if vt == nil {
		nilVThread("Wait")
	}
	if ctx == nil {
		nilContext("VThread.Wait")
	}
	if vt.finished() {
		return vt.err
	}
	if cur := Current(); cur != nil {
		if cur == vt {
			panic("scheduler: a virtual thread cannot Wait for itself")
		}
		if w := vt.addJoiner(); w != nil {
			stop := cur.s.watchContext(ctx, func() { w.wake() }) // the waiter's scheduler's
			w.wait()
			stop()
			vt.dropJoiner(w)
		}
	} else {
		select {
		case <-vt.Done():
		case <-ctx.Done():
		}
	}
	if vt.finished() {
		return vt.err
	}
	return ctx.Err()
}

// maxNested is how many virtual threads runNested runs one inside the
// other on a carrier. Each holds its frames and its joiner's on the
// carrier's stack. A deep chain of joins would grow that stack without
// limit.
const maxNested = 64

// runNested runs vt inside cur's continuation and reports whether it
// did. cur is the calling virtual thread, about to join vt. It runs vt
// if vt waits among the last queued on cur's carrier, so would run there
// soon. As in a fork/join pool's join, this saves parking cur and
// thawing it after vt. vt runs until it finishes or parks. Then cur
// parks for it as usual.
//
// vt runs on cur's goroutine, above cur's frames, as a continuation
// nested in cur's. A runtime.Goexit in vt ends the goroutine, so it ends
// cur too, both with ErrGoexit, and the carrier is replaced. Join calls
// it only when cur's continuation is the innermost one mounted
// (currentTop). Nested inside a continuation that cur's body mounted, vt
// could yield to that one's scope. It runs nothing nested in
// deterministic mode: there every virtual thread runs from the run
// queue. Nor on the portable backend: there vt's continuation would be a
// coroutine made by cur's goroutine, bound to cur's thread locking.
//
// A panic that escapes vt's body unwinds into cur, as a Goexit does. It
// becomes cur's panic; at the top of a carrier it would crash the
// program. Only Options.OnPanic can raise one: the body recovers vt's
// own.
func runNested(cur, vt *VThread) bool {
	c := cur.carrier
	if c == nil || c.s != vt.s || !c.s.nest || c.nested >= maxNested ||
		vt.state.Load() != vtQueued || !c.unqueue(vt) {
		return false
	}
	c.nested++
	// cur's profiler labels. run puts them back after vt, unless vt
	// ends the run by a Goexit or a panic. Then this does, so that
	// cur's deferred calls, and a recover there, have cur's own.
	outer := profLabel()
	normal := false
	defer func() {
		c.nested--
		if !normal {
			// vt called runtime.Goexit, which goes on unwinding cur.
			// The carrier's loop finishes cur; vt is finished here.
			// Or OnPanic panicked, which unwinds into cur.
			setProfLabel(outer)
			c.cur = cur
			vt.carrier = nil
			c.s.finish(vt, nil)
		}
	}()
	c.run(vt)
	normal = true
	return true
}
