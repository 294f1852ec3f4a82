package scheduler

import "time"

// monitorTick is how often the monitor looks for wake-ups that carriers
// owe: a virtual thread queued by one that then runs on without parking
// (or blocks its carrier in a system call) waits one to two ticks for an
// idle carrier to be woken for it. A sleep this short takes about a
// millisecond when the runtime's Ps are idle (its poller waits in whole
// milliseconds): a few milliseconds in all, as measured.
const monitorTick = 100 * time.Microsecond

// monitorIdleTicks is how many ticks in a row with nothing owed the
// monitor waits before it waits longer: for its next look at the carriers
// (lookEvery) while one runs, else until kicked.
const monitorIdleTicks = 10

// monitor pays the wake-ups that carriers owe (carrier.pushOwn) and have
// not paid themselves within a tick, by waking an idle carrier for each,
// and looks for held carriers every lookEvery (held.go). It ticks while
// wake-ups are owed. After monitorIdleTicks ticks with none it waits,
// looking for held carriers meanwhile while a carrier is off the idle
// list; a carrier that begins to owe a wake-up kicks it, and so does one
// that leaves the idle list while none was. It exits once the scheduler
// has shut down and nothing is live.
func (s *Scheduler) monitor() {
	defer s.wg.Done()
	defer s.releaseAll()
	quiet := 0
	nextLook := time.Now().Add(lookEvery)
	timer := time.NewTimer(lookEvery)
	timer.Stop()
	for {
		select {
		case <-s.allDone:
			return
		default:
		}
		time.Sleep(monitorTick)
		owed := s.payOwed(s.tick.Add(1))
		if now := time.Now(); !now.Before(nextLook) {
			s.lookHeld(now)
			nextLook = now.Add(lookEvery)
		}
		if owed {
			quiet = 0
			continue
		}
		if quiet++; quiet < monitorIdleTicks {
			continue
		}
		quiet = 0
		if !s.wait(timer, &nextLook) {
			return
		}
	}
}

// wait waits, with nothing owed, until a carrier kicks the monitor, making
// each look for held carriers as it falls due (nextLook) meanwhile while a
// carrier runs. It reports false if the scheduler is done.
func (s *Scheduler) wait(timer *time.Timer, nextLook *time.Time) bool {
	defer func() {
		s.monitorIdle.Store(false)
		s.monitorParked.Store(false)
	}()
	for {
		// Wait, unless a carrier began to owe meanwhile: it stores owed
		// before it loads monitorParked, and this stores monitorParked
		// before it loads owed, so one of the two sees the other. So for
		// monitorIdle against a carrier's leaving the idle list, which
		// both do under s.mu (anyBusy).
		s.monitorParked.Store(true)
		s.monitorIdle.Store(true)
		var look <-chan time.Time
		if s.anyBusy() {
			s.monitorIdle.Store(false)
			timer.Reset(time.Until(*nextLook))
			look = timer.C
		} else {
			s.releaseAll() // every carrier is idle: none is held
		}
		if s.anyOwed() {
			timer.Stop()
			return true
		}
		select {
		case <-s.monitorKick:
			timer.Stop()
			return true
		case now := <-look:
			s.lookHeld(now)
			*nextLook = now.Add(lookEvery)
		case <-s.allDone:
			timer.Stop()
			return false
		}
	}
}

// payOwed wakes an idle carrier for each wake-up owed since before the
// last tick, tick being this one, and reports whether any is owed.
func (s *Scheduler) payOwed(tick uint64) (owed bool) {
	for _, c := range s.carriers {
		if o := c.owed.Load(); o != 0 {
			owed = true
			// Owed since before the last tick: a whole tick ago.
			if o+1 < tick && c.owed.CompareAndSwap(o, 0) {
				s.wakeOne()
			}
		}
	}
	return owed
}

// anyOwed reports whether a carrier owes a wake-up.
func (s *Scheduler) anyOwed() bool {
	for _, c := range s.carriers {
		if c.owed.Load() != 0 {
			return true
		}
	}
	return false
}

// kickIdleMonitor kicks the monitor if it is parked with no look to make:
// c, which calls it, has left the idle list and may run a virtual thread
// that holds it.
func (s *Scheduler) kickIdleMonitor() {
	if s.monitorIdle.Load() {
		select {
		case s.monitorKick <- struct{}{}:
		default:
		}
	}
}
