package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// A compensation carrier leaves as soon as the block it stood in for has
// ended, busy or not: threads that keep yielding (the queues never empty)
// must not keep more carriers running than Options.Carriers once nothing
// is blocked pinned.
func TestBusyCompensationCarrierRetires(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1, MaxCompensation: 1})
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

// Compensation carriers that went idle while carriers were still blocked
// pinned retire once the blocks end, not at some unrelated wake-up: a
// pinned park that ends wakes one (wakeSurplusTemp).
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
// the surplus carrier sleep on (a locked OS thread, counted in s.temp).
// So a compensation carrier on the idle list looks once more whether it
// is one too many (surplusTemp).
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
	testHooks.sleepBeforeIdle.Store(&hook)
	t.Cleanup(func() { testHooks.sleepBeforeIdle.Store(nil) })

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

// A compensation carrier steals from every carrier: its id is past the
// carriers', and the steal loop must not skip carrier 0. A virtual thread
// starts a helper (on its carrier's queue) and then blocks its carrier
// pinned until the helper has run; with two carriers the other one is
// blocked pinned first, and the rounds land on carrier 0 some of the time.
func TestCompensationStealsFromEveryCarrier(t *testing.T) {
	helped := func(t *testing.T, s *Scheduler) (onCarrier0 bool) {
		var helped, on0 atomic.Bool
		v := goOrFatal(t, s, func(ctx context.Context) error {
			self := Current()
			on0.Store(self.carrier == s.carriers[0])
			if _, err := s.Go(func(ctx context.Context) error {
				helped.Store(true)
				self.Unpark()
				return nil
			}); err != nil {
				return err
			}
			parkPinnedUntil(&helped)
			return nil
		})
		if !doneWithin(v, 5*time.Second) {
			t.Fatalf("the helper stayed on the queue of a blocked carrier (carrier 0: %v): no compensation carrier took it", on0.Load())
		}
		return on0.Load()
	}
	t.Run("carriers=1", func(t *testing.T) {
		helped(t, newTest(t, Options{Carriers: 1, MaxCompensation: 1}))
	})
	t.Run("carriers=2", func(t *testing.T) {
		s := newTest(t, Options{Carriers: 2, MaxCompensation: 2})
		on0 := 0
		for range 10 {
			var release atomic.Bool
			b := goOrFatal(t, s, func(ctx context.Context) error { parkPinnedUntil(&release); return nil })
			waitUntil(t, "one carrier blocked", func() bool { return s.blocked.Load() == 1 })
			if helped(t, s) {
				on0++
			}
			release.Store(true)
			b.Unpark()
			if err := b.Join(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%d of 10 rounds on carrier 0", on0)
	})
}
