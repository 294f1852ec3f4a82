package scheduler

import (
	"context"
	"time"
)

// Stopper is a timer that can be stopped: *time.Timer, or a timer of the
// deterministic mode's virtual clock.
type Stopper interface {
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// epoch is the time the virtual clock of deterministic schedulers starts
// at.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Now returns the scheduler's current time: the wall clock, or in
// deterministic mode the virtual clock. The virtual clock starts at
// 2000-01-01 UTC and has no monotonic reading. A deterministic Now is for
// the scheduler's own waits and for a simulation's records. As a deadline
// for package time, context or vnet, which use the wall clock, it lies in
// the past.
func (s *Scheduler) Now() time.Time {
	s.check("Now")
	if d := s.det; d != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		return epoch.Add(d.now)
	}
	return time.Now()
}

// AfterFunc calls f after d by the scheduler's clock.
//
// Outside deterministic mode it is time.AfterFunc: f runs in a goroutine
// of its own. In deterministic mode, where the clock is virtual, f runs in
// a virtual thread of its own, started when the timer fires. What f does
// (a select's choice, a park) is then part of the seeded interleaving. f
// may block there too, and a panic in f ends the program as in real mode.
//
// That thread is one of the scheduler's. It runs during a Shutdown or
// Close that has begun, and they wait for it like any other; real mode's
// goroutine would be left running. Shutdown does not wait for a timer
// that has not fired. A real one fires later. A deterministic one never
// fires if it is still pending, or already due, when the last virtual
// thread ends during the Shutdown: virtual time stops there, and f would
// start after Shutdown saw the scheduler drained. Nor does one armed
// after that; its Stop reports true, as for any timer that has not fired.
//
// In deterministic mode f cannot call s.Close or s.Shutdown, which would
// wait for it: they panic, and so end the program. A timer meant to shut
// the scheduler down starts a goroutine that does (go s.Close()).
// AfterFunc panics at once if f is nil, where time.AfterFunc's goroutine
// would when the timer fired.
func (s *Scheduler) AfterFunc(d time.Duration, f func()) Stopper {
	s.check("AfterFunc")
	if f == nil {
		panic("scheduler: AfterFunc with a nil function")
	}
	if s.det == nil {
		return time.AfterFunc(d, f)
	}
	return s.afterFunc(d, func() {
		s.startFrom("", nil, func(context.Context) error {
			defer func() {
				if r := recover(); r != nil {
					go panic(r) // as from time.AfterFunc's goroutine
				}
			}()
			f()
			return nil
		}, true)
	})
}

// afterFunc calls f after d by the scheduler's clock: on time.AfterFunc's
// goroutine, or, in deterministic mode, on the carrier.
func (s *Scheduler) afterFunc(d time.Duration, f func()) Stopper {
	if s.det != nil {
		t := s.det.afterFunc(d, f)
		// The carrier may be asleep, having found no timer to advance
		// to: a timer armed from outside it (a plain goroutine) must wake
		// it, or the timer never fires.
		s.wakeOne()
		return t
	}
	return time.AfterFunc(d, f)
}
