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
// monitor waits before it parks until a carrier owes a wake-up again.
const monitorIdleTicks = 10

// monitor pays the wake-ups that carriers owe (carrier.pushOwn) and have
// not paid themselves within a tick, by waking an idle carrier for each.
// It ticks while wake-ups are owed, and parks after monitorIdleTicks
// ticks with none: a carrier that owes one then kicks it. It exits once
// the scheduler has shut down and nothing is live.
func (s *Scheduler) monitor() {
	defer s.wg.Done()
	quiet := 0
	for {
		select {
		case <-s.allDone:
			return
		default:
		}
		time.Sleep(monitorTick)
		tick := s.tick.Add(1)
		owed := false
		for _, c := range s.carriers {
			if o := c.owed.Load(); o != 0 {
				owed = true
				// Owed since before the last tick: a whole tick ago.
				if o+1 < tick && c.owed.CompareAndSwap(o, 0) {
					s.wakeOne()
				}
			}
		}
		if owed {
			quiet = 0
			continue
		}
		if quiet++; quiet < monitorIdleTicks {
			continue
		}
		quiet = 0
		// Park, unless a carrier began to owe meanwhile: it stores owed
		// before it loads monitorParked, and this stores monitorParked before it
		// loads owed, so one of the two sees the other.
		s.monitorParked.Store(true)
		for _, c := range s.carriers {
			if c.owed.Load() != 0 {
				owed = true
				break
			}
		}
		if !owed {
			select {
			case <-s.monitorKick:
			case <-s.allDone:
				s.monitorParked.Store(false)
				return
			}
		}
		s.monitorParked.Store(false)
	}
}
