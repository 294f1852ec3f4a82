package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestNilAndZeroSchedulerPanicClearly: every method of a nil *Scheduler (as
// New returns with an error) and of a zero Scheduler panics with a message
// that names the method and the mistake. They used to be nil dereferences,
// and worse for a zero Scheduler: Go returned a virtual thread that no
// carrier would ever run (its Join hung), and Shutdown panicked with
// "close of nil channel".
func TestNilAndZeroSchedulerPanicClearly(t *testing.T) {
	fn := func(context.Context) error { return nil }
	calls := map[string]func(s *Scheduler){
		"Go":        func(s *Scheduler) { s.Go(fn) },
		"GoNamed":   func(s *Scheduler) { s.GoNamed("x", fn) },
		"NewGroup":  func(s *Scheduler) { s.NewGroup(context.Background()) },
		"AfterFunc": func(s *Scheduler) { s.AfterFunc(time.Hour, func() {}) },
		"Now":       func(s *Scheduler) { s.Now() },
		"Pins":      func(s *Scheduler) { s.Pins() },
		"Live":      func(s *Scheduler) { s.Live() },
		"Shutdown":  func(s *Scheduler) { s.Shutdown(context.Background()) },
		"Close":     func(s *Scheduler) { s.Close() },
	}
	for name, call := range calls {
		msg := mustPanic(t, func() { call(nil) })
		if !strings.Contains(msg, "Scheduler."+name+" on a nil *Scheduler") || !strings.Contains(msg, "New") {
			t.Errorf("%s on a nil *Scheduler panicked with %q", name, msg)
		}
		msg = mustPanic(t, func() { call(new(Scheduler)) })
		if !strings.Contains(msg, "Scheduler."+name+" on a zero Scheduler") || !strings.Contains(msg, "New") {
			t.Errorf("%s on a zero Scheduler panicked with %q", name, msg)
		}
	}
	// WaitGroup.Go checks before it adds to the counter.
	for _, s := range []*Scheduler{nil, new(Scheduler)} {
		var wg WaitGroup
		msg := mustPanic(t, func() { wg.Go(s, fn) })
		if !strings.Contains(msg, "WaitGroup.Go with a") || !strings.Contains(msg, "Scheduler") {
			t.Errorf("WaitGroup.Go with %p panicked with %q", s, msg)
		}
		wg.mu.Lock()
		n := wg.n
		wg.mu.Unlock()
		if n != 0 {
			t.Errorf("WaitGroup.Go that panicked left the counter at %d", n)
		}
	}
}
