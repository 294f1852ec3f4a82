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

// A compensation carrier that has decided not to retire (retireTemp: the
// block still lasts) but has not yet put itself on the idle list when the
// pinned park ends: wakeSurplusTemp finds no idle compensation carrier to
// wake, and sleep, which looked only for work once it was on the list, let
// the surplus carrier sleep on (a locked OS thread, counted in s.temp),
// as before the change. Now a compensation carrier on the idle list looks
// once more whether it is one too many (surplusTemp). Found by a review.
func TestCompensationRetiresAfterRaceWithIdle(t *testing.T) {
	s := newTest(t, Options{Carriers: 1, MaxCompensation: 1})
	inHook := make(chan struct{}, 1)
	release := make(chan struct{})
	hook := func(c *carrier) {
		if !c.temp {
			return
		}
		select {
		case inHook <- struct{}{}:
			<-release // hold it between retireTemp and the idle list
		default:
		}
	}
	sleepHooks.beforeIdle.Store(&hook)
	t.Cleanup(func() { sleepHooks.beforeIdle.Store(nil) })

	p := goOrFatal(t, s, func(ctx context.Context) error {
		pinning.Do(func() { Park() }) // blocks C0: a compensation carrier starts
		return nil
	})
	<-inHook // the compensation carrier found nothing and did not retire
	for s.blocked.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	p.Unpark() // the block ends: blocked 0, wakeSurplusTemp finds no idle temp
	if err := joinWithin(t, p); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	close(release) // now it goes idle with temp 1 > blocked 0
	var temp int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		temp = s.temp
		s.mu.Unlock()
		if temp == 0 {
			return
		}
	}
	s.mu.Lock()
	t.Errorf("2 s after the pinned park ended: temp=%d blocked=%d idle=%d: the surplus compensation carrier sleeps on", s.temp, s.blocked.Load(), len(s.idle))
	s.mu.Unlock()
}
