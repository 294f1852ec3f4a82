package scheduler

// startTemp starts a compensation carrier.
func (s *Scheduler) startTemp() {
	s.mu.Lock()
	if s.temp >= s.opts.MaxCompensation || s.temp >= s.stoodFor() {
		// Options.MaxCompensation run already, or one for every carrier
		// blocked pinned (a surplus one retires only when it next looks
		// for work, after the thread it runs parks or ends).
		s.mu.Unlock()
		return
	}
	s.temp++
	c := newCarrier(s, len(s.carriers), true)
	s.mu.Unlock()
	s.wg.Add(1)
	go c.loop()
}

// surplusTemp reports whether more compensation carriers run than
// carriers are blocked pinned.
func (s *Scheduler) surplusTemp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stoodFor() < s.temp
}

// wakeSurplusTemp wakes an idle compensation carrier if more run than
// carriers are blocked pinned. The woken carrier looks again and retires;
// one that went idle while the blocks lasted would otherwise sleep on.
func (s *Scheduler) wakeSurplusTemp() {
	s.mu.Lock() // a pinned park's slow path
	var w *carrier
	if s.temp > s.stoodFor() {
		for i := len(s.idle) - 1; i >= 0; i-- {
			if c := s.idle[i]; c.temp {
				w = c
				s.idle = append(s.idle[:i], s.idle[i+1:]...)
				s.nidle.Add(-1)
				break
			}
		}
	}
	s.mu.Unlock()
	if w != nil {
		w.wake <- struct{}{}
	}
}

// retireTemp reports whether a compensation carrier that looks for work
// should exit: fewer carriers are blocked pinned than compensation
// carriers run. If so, it counts the carrier out in the same step, so that
// two cannot both leave. A carrier looks after running a thread, or on
// finding none.
func (s *Scheduler) retireTemp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stoodFor() < s.temp {
		s.temp--
		return true
	}
	return false
}

// stoodFor is how many carriers compensation carriers stand in for: those
// blocked pinned or in Blocking, and those the monitor found held.
func (s *Scheduler) stoodFor() int {
	return int(s.blocked.Load()) + int(s.holds.Load())
}
