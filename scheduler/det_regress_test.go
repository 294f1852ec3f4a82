package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// In deterministic mode a timer already due when it is made (a duration of
// zero or less) fires at the next pick, as it would at once in real mode,
// without moving the clock. It used to fire only when nothing else could
// run, so a thread polling with Yield for it spun for ever.
func TestDeterministicDueTimerFires(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		s := newTest(t, Options{Deterministic: true, Seed: 1})
		var fired atomic.Bool
		yields := 0
		vt, _ := s.Go(func(ctx context.Context) error {
			Sleep(time.Second) // the clock is not at its start
			s.AfterFunc(d, func() { fired.Store(true) })
			for !fired.Load() && yields < 1000 {
				Yield()
				yields++
			}
			return nil
		})
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
		if !fired.Load() {
			t.Fatalf("AfterFunc(%v) had not fired after %d Yields", d, yields)
		}
		if yields > 1 {
			t.Errorf("AfterFunc(%v) fired after %d Yields, want 1", d, yields)
		}
		if got := s.Now().Sub(epoch); got != time.Second {
			t.Errorf("the clock moved to %v, want it left at 1s", got)
		}
	}
}
