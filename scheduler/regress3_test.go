package scheduler

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// Regression tests for bugs an audit of the scheduler's lifecycle found
// (2026-11-26): each failed before its fix.

// Options.MaxCompensation bounds the compensation carriers. startTemp used
// to start one whenever no more carriers than the bound were blocked
// pinned, without counting those already running; an idle one retires
// only once it finds no work, so with the queues busy they piled up (7 to
// 11 with one carrier, a bound of 1 and four busy threads). And a pinned
// Park that returned at once on its permit started one too.
func TestCompensationBounded(t *testing.T) {
	s := newTest(t, Options{Carriers: 1, MaxCompensation: 1})
	var stop atomic.Bool
	defer stop.Store(true)
	for range 4 {
		goOrFatal(t, s, func(context.Context) error {
			for !stop.Load() {
				Yield()
			}
			return nil
		})
	}
	var parker atomic.Pointer[VThread]
	quit := make(chan struct{})
	unparked := make(chan struct{})
	go func() {
		defer close(unparked)
		for {
			select {
			case <-quit:
				return
			default:
			}
			if vt := parker.Load(); vt != nil {
				vt.Unpark()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	maxTemp := 0
	p := goOrFatal(t, s, func(context.Context) error {
		parker.Store(Current())
		for range 300 {
			pinning.Do(func() { Park() })
			s.mu.Lock()
			maxTemp = max(maxTemp, s.temp)
			s.mu.Unlock()
		}
		return nil
	})
	err := joinWithin(t, p)
	close(quit)
	<-unparked
	stop.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	if maxTemp > 1 {
		t.Errorf("%d compensation carriers ran at once, with MaxCompensation 1", maxTemp)
	}
	if n := s.blocked.Load(); n != 0 {
		t.Errorf("%d carriers still counted blocked pinned", n)
	}
}

// An Unpark that a Sleep used up is given back: a Park after the Sleep
// returns. Sleep's parks consumed the permit of an Unpark that came before
// or during it, and the Park after it then waited for good.
func TestSleepKeepsUnpark(t *testing.T) {
	for _, det := range []bool{false, true} {
		s := newTest(t, Options{Carriers: 1, Deterministic: det, Seed: 1})
		before := goOrFatal(t, s, func(context.Context) error {
			Current().Unpark()
			Sleep(time.Millisecond)
			Park()
			return nil
		})
		if err := joinWithin(t, before); err != nil {
			t.Fatal(err)
		}
		var sleeper atomic.Pointer[VThread]
		during := goOrFatal(t, s, func(context.Context) error {
			sleeper.Store(Current())
			Sleep(20 * time.Millisecond)
			Park()
			return nil
		})
		waker := goOrFatal(t, s, func(context.Context) error {
			for sleeper.Load() == nil {
				Yield()
			}
			Sleep(5 * time.Millisecond) // the sleeper sleeps meanwhile
			sleeper.Load().Unpark()
			return nil
		})
		if err := joinWithin(t, waker); err != nil {
			t.Fatal(err)
		}
		if err := joinWithin(t, during); err != nil {
			t.Fatal(err)
		}
	}
}

// The virtual clock does not overflow: a timer for a duration that would
// take it past the largest time waits as if for ever, where it used to
// wrap around, fire at once and move the clock back three centuries.
func TestDeterministicHugeTimer(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 7})
	var fired atomic.Bool
	var before, after time.Time
	firedEarly := false
	vt := goOrFatal(t, s, func(context.Context) error {
		Sleep(time.Millisecond) // the clock past zero: the sum overflows
		before = s.Now()
		tm := s.AfterFunc(time.Duration(math.MaxInt64), func() { fired.Store(true) })
		Sleep(time.Second)
		after = s.Now()
		firedEarly = fired.Load()
		tm.Stop()
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if firedEarly {
		t.Error("a timer for the largest duration fired within a second")
	}
	if !after.After(before) || after.Sub(before) != time.Second {
		t.Errorf("the virtual clock went from %v to %v over a Sleep of one second", before, after)
	}
}

// A negative Carriers is a mistake New reports; it silently meant
// GOMAXPROCS, as 0 does.
func TestNegativeCarriers(t *testing.T) {
	s, err := New(Options{Carriers: -2})
	if err == nil {
		s.Close()
		t.Fatal("New(Carriers: -2) succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "Carriers is -2") {
		t.Errorf("New(Carriers: -2): %v, want an error that names the value", err)
	}
}
