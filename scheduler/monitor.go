package scheduler

import "time"

// monitorTick is how often the monitor looks for wake-ups that carriers
// owe. A carrier may queue a virtual thread, then run on without parking
// or block in a system call. The queued thread then waits one to two
// ticks for an idle carrier to be woken for it. A sleep this short lasts
// about a millisecond when the runtime's Ps are idle: its poller waits
// in whole milliseconds.
const monitorTick = 100 * time.Microsecond

// monitorIdleTicks is how many ticks in a row with nothing owed the
// monitor waits before it waits longer. While a carrier runs, it then
// waits for its next look at the carriers (lookEvery); else until kicked.
const monitorIdleTicks = 10

// monitor pays the wake-ups that carriers owe (carrier.pushOwn) and have
// not paid themselves within a tick. It wakes an idle carrier for each.
// It looks for held carriers every lookEvery (held.go). It ticks while
// wake-ups are owed. After monitorIdleTicks ticks with none it waits.
// While it waits and a carrier is off the idle list, it still looks for
// held carriers. A carrier that begins to owe a wake-up kicks it. So
// does one that leaves the idle list while none was off it. It exits
// once the scheduler has shut down and nothing is live.
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

// wait waits, with nothing owed, until a carrier kicks the monitor.
// Meanwhile, while a carrier runs, it makes each look for held carriers
// as it falls due (nextLook). It reports false if the scheduler is done.
func (s *Scheduler) wait(timer *time.Timer, nextLook *time.Time) bool {
	defer func() {
		s.monitorIdle.Store(false)
		s.monitorParked.Store(false)
	}()
	for {
		// Wait, unless a carrier began to owe meanwhile. It stores owed
		// before it loads monitorParked. This stores monitorParked
		// before it loads owed. So one of the two sees the other.
		// Likewise for monitorIdle against a carrier's leaving the idle
		// list, which both do under s.mu (anyBusy).
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
// last tick; tick is this one. It reports whether any is owed.
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

// kickIdleMonitor kicks the monitor if it is parked with no look to
// make. c, the caller, has left the idle list and may run a virtual
// thread that holds it.
func (s *Scheduler) kickIdleMonitor() {
	if s.monitorIdle.Load() {
		select {
		case s.monitorKick <- struct{}{}:
		default:
		}
	}
}
