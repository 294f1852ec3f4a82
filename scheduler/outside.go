package scheduler

import (
	"runtime"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/rt"
)

// runOutside runs vt on the calling plain goroutine, which is about to
// join it, and reports whether it did. As a fork/join pool's external
// join runs a task still in its submission queue, this saves a
// cross-thread hand-off each way: waking a carrier locked to its OS
// thread, and readying the joiner from that thread's P, which a locked
// carrier cannot run.
//
// It runs vt only if vt is the oldest thread on the global queue, so no
// thread queued before it waits longer, and a carrier is idle. It takes
// both in one step under s.mu: vt off the queue, the carrier off the idle
// list (takeOldest). The caller then runs vt as that carrier, so no
// more threads run at once than carriers could run. The carrier's
// goroutine stays blocked in sleep meanwhile. vt runs until it finishes
// or parks; another carrier resumes it if it parks.
//
// It runs nothing on the portable backend or in deterministic mode (as
// runNested), inside a continuation (vt's frames would be nested in that
// continuation's), on a goroutine locked to its thread (vt would run
// under that thread's state), or where carriers are bound to CPUs (vt
// would run on the caller's CPU). A runtime.Goexit in vt ends the
// calling goroutine too, after its deferred calls, as in runNested. So
// does a panic that Options.OnPanic raises: it unwinds into the caller.
func (s *Scheduler) runOutside(vt *VThread) bool {
	if !s.nest || len(s.opts.CPUs) > 0 || s.nidle.Load() == 0 || weft.Innermost() != nil {
		return false
	}
	if locked, ok := rt.Locked(); locked || !ok {
		return false
	}
	c := s.takeOldest(vt)
	if c == nil {
		return false
	}
	// The monitor may be parked with every carrier idle: a thread that
	// holds the borrowed carrier must be seen, as on a carrier (sleep).
	c.borrowed.Store(true)
	s.kickIdleMonitor()
	if s.lock {
		runtime.LockOSThread()
	}
	outer := profLabel()
	normal := false
	defer func() {
		if !normal {
			// vt called runtime.Goexit, which goes on unwinding the
			// caller, or OnPanic panicked. run did not finish.
			setProfLabel(outer)
			c.cur = nil
			vt.carrier = nil
			s.finish(vt, nil)
		}
		if s.lock {
			runtime.UnlockOSThread()
		}
		c.borrowed.Store(false)
		s.giveBack(c)
	}()
	c.run(vt)
	normal = true
	return true
}

// takeOldest takes vt off the global queue and an idle carrier off the
// idle list, in one step under s.mu, and returns the carrier. It takes
// neither and returns nil unless vt is the oldest queued thread and an
// ordinary carrier is idle.
func (s *Scheduler) takeOldest(vt *VThread) *carrier {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ghead == len(s.global) || s.global[s.ghead] != vt {
		return nil
	}
	var c *carrier
	for i := len(s.idle) - 1; i >= 0; i-- {
		if o := s.idle[i]; !o.temp {
			c = o
			s.idle = append(s.idle[:i], s.idle[i+1:]...)
			s.nidle.Add(-1)
			break
		}
	}
	if c == nil {
		return nil
	}
	s.global[s.ghead] = nil
	s.ghead++
	if s.ghead == len(s.global) {
		s.global, s.ghead = s.global[:0], 0
	}
	s.nglobal.Store(int32(len(s.global) - s.ghead))
	return c
}

// giveBack puts c, borrowed by runOutside, back on the idle list, and
// then looks at the queues, as a carrier going to sleep does (sleep). A
// thread queued meanwhile found c off the list, or was queued on c by the
// thread it ran. If the look finds one, it wakes an idle carrier: c, if
// still idle. c's goroutine has been blocked in sleep throughout, on
// c.wake, so it wakes as from any sleep.
func (s *Scheduler) giveBack(c *carrier) {
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.nidle.Add(1)
	s.mu.Unlock()
	if s.drained() {
		s.wakeAll() // c missed the wakeAll of the drain
	} else if c.hasWork() || s.hasGlobal() {
		s.wakeOne()
	}
}

// readyOutside queues vt, started by a plain goroutine, on the global
// queue. It kicks s's waker goroutine instead of waking a carrier. An
// idle carrier then stays on the idle list until the waker runs. So a
// Join that follows at once can run vt as that carrier (runOutside).
// Waking a carrier from here would put its goroutine on this goroutine's
// P, where its locked thread cannot run it, and take it off the idle
// list meanwhile.
//
// The kick is a send on a channel with room for one. If it is full, the
// waker has yet to take the kick there. It looks at the queue after it
// takes it, so after this push.
func (s *Scheduler) readyOutside(vt *VThread) {
	s.mu.Lock()
	s.appendGlobal(vt)
	s.mu.Unlock()
	select {
	case s.outsideKick <- struct{}{}:
	default:
	}
}

// waker wakes a carrier for the threads that plain goroutines start
// (readyOutside), if a Join has not run them first. It is an ordinary
// goroutine, not locked to a thread: any P runs it. It exits once the
// scheduler has shut down and nothing is live.
func (s *Scheduler) waker() {
	defer s.wg.Done()
	for {
		select {
		case <-s.outsideKick:
			if h := testHooks.waker.Load(); h != nil {
				(*h)(s)
			}
			if s.hasGlobal() {
				s.wakeOne()
			}
		case <-s.allDone:
			return
		}
	}
}
