package scheduler

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/weftrt/weft/pinning"
)

// A compensation carrier leaves as soon as the block it stood in for has
// ended, busy or not: threads that keep yielding (the queues never empty)
// must not keep more carriers running than Options.Carriers once nothing
// is blocked pinned.
func TestBusyCompensationCarrierRetires(t *testing.T) {
	s := proofSched(t, Options{Carriers: 1, MaxCompensation: 1})
	temps := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.temp
	}
	pinned := goOrFatal(t, s, func(ctx context.Context) error {
		pinning.Do(Park) // blocks the carrier: a compensation carrier starts
		return nil
	})
	waitUntil(t, "the carrier to block pinned", func() bool { return s.blocked.Load() == 1 && temps() == 1 })
	var stop atomic.Bool
	var ran atomic.Int64
	var busy []*VThread
	for range 8 {
		busy = append(busy, goOrFatal(t, s, func(ctx context.Context) error {
			for !stop.Load() {
				ran.Add(1)
				Yield()
			}
			return nil
		}))
	}
	defer func() {
		stop.Store(true)
		for _, vt := range busy {
			if err := joinWithin(t, vt); err != nil {
				t.Error(err)
			}
		}
	}()
	waitUntil(t, "the compensation carrier to run the yielding threads", func() bool { return ran.Load() > 1000 })
	pinned.Unpark()
	if err := joinWithin(t, pinned); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the busy compensation carrier to retire", func() bool { return temps() == 0 })
	before := ran.Load()
	waitUntil(t, "the yielding threads to go on, on the one carrier", func() bool { return ran.Load() > before+1000 })
}
