package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// An Unpark that comes during a Sleep, after the timer has woken the
// sleeper but before the sleeper runs again, is not lost: the next Park
// returns at once, as Sleep's doc says. It used to be: the timer woke the
// sleeper through the permit, and the one permit then stood for both
// wake-ups, which the park after the yield cleared. The timer (and
// SleepContext's context watch) now wake the sleeper by its state
// (wakeTimer), and the permit stands for other Unparks only.
func TestSleepKeepsUnparkWhileQueued(t *testing.T) {
	for _, ctxSleep := range []bool{false, true} {
		s := newTest(t, Options{Carriers: 1})
		sleeperIn := make(chan *VThread, 1)
		parked := make(chan struct{})
		returned := make(chan struct{})
		a := goOrFatal(t, s, func(ctx context.Context) error {
			sleeperIn <- Current()
			if ctxSleep {
				SleepContext(context.Background(), time.Millisecond)
			} else {
				Sleep(time.Millisecond)
			}
			close(parked)
			Park() // the Unpark that came during the Sleep: returns at once
			close(returned)
			return nil
		})
		me := <-sleeperIn
		// B holds the only carrier across A's deadline, so A's timer
		// queues A; then, while A is still queued, B unparks it.
		b := goOrFatal(t, s, func(ctx context.Context) error {
			time.Sleep(20 * time.Millisecond) // blocks the carrier, past A's deadline
			me.Unpark()                       // during A's Sleep: A has not run since
			return nil
		})
		if err := joinWithin(t, b); err != nil {
			t.Fatal(err)
		}
		select {
		case <-returned:
		case <-time.After(2 * time.Second):
			select {
			case <-parked:
				t.Errorf("SleepContext=%v: the Unpark made during Sleep was lost: Park after Sleep blocks", ctxSleep)
			default:
				t.Errorf("SleepContext=%v: Sleep did not return", ctxSleep)
			}
			me.Unpark() // let it end
		}
		if err := joinWithin(t, a); err != nil {
			t.Fatal(err)
		}
	}
}

// Compensation carriers that went idle while carriers were still blocked
// pinned retire once the blocks end. They used to sleep on in the idle
// list (locked OS threads, counted in s.temp) until some unrelated
// wake-up: a pinned park that ends now wakes one (wakeSurplusTemp).
func TestCompensationRetiresAfterPinnedParks(t *testing.T) {
	s := newTest(t, Options{Carriers: 1, MaxCompensation: 2})
	a := make(chan struct{})
	// P1 blocks C0 pinned: a compensation carrier T1 starts and runs P2,
	// which blocks T1 pinned: T2 starts, finds nothing, sleeps (blocked 2,
	// temp 2, so it may not retire).
	var vts []*VThread
	for range 2 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
			me := Current()
			go func() { <-a; me.Unpark() }()
			pinning.Do(func() { Park() })
			return nil
		}))
	}
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	t.Logf("while blocked: temp=%d blocked=%d idle=%d", s.temp, s.blocked.Load(), len(s.idle))
	s.mu.Unlock()
	close(a)
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	var temp, idle int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		temp, idle = s.temp, len(s.idle)
		s.mu.Unlock()
		if temp == 0 {
			return
		}
	}
	t.Errorf("5 s after the last pinned park ended: temp=%d blocked=%d idle carriers=%d (compensation carriers did not retire)", temp, s.blocked.Load(), idle)
}
