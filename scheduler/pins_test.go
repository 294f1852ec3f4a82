package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// Every kind of wait, made while pinned, racing what ends it: Unparks from
// goroutines, Sleep's timer, SleepContext's context, a Chan's timeout, a
// Mutex's unlock, a Join's and a Wait's child, a Wait's context. Each pinned
// wait blocks its carrier (compensation carriers, one per block, keep the
// rest going: the bound is high enough that it is never reached), and every
// one must end: a lost wake-up of a pinned park leaves a thread, and its
// carrier, blocked for good. Afterwards nothing is counted blocked and the
// compensation carriers retire.
func TestPinWaitsRace(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 2, MaxCompensation: 64})
	var helpers sync.WaitGroup
	defer helpers.Wait()
	ch := NewChan[int](0)
	var mu Mutex
	var vts []*VThread
	for i := range 8 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
			me := Current()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for j := range 100 {
				if r.IntN(3) == 0 {
					helpers.Go(me.Unpark) // a stray wake-up: Park may return spuriously
				}
				var err error
				pinning.Do(func() {
					switch (i + j) % 7 {
					case 0:
						Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
					case 1:
						c, cancel := context.WithCancel(context.Background())
						d := time.Duration(r.IntN(50)) * time.Microsecond
						helpers.Go(func() { time.Sleep(d); cancel() })
						SleepContext(c, time.Duration(r.IntN(50))*time.Microsecond)
						cancel()
					case 2:
						if i%2 == 0 {
							ch.SendTimeout(1, 50*time.Microsecond)
						} else {
							ch.RecvTimeout(50 * time.Microsecond)
						}
					case 3:
						mu.Lock()
						Sleep(time.Microsecond)
						mu.Unlock()
					case 4:
						helpers.Go(me.Unpark)
						Park()
					case 5:
						var k *VThread
						if k, err = s.Go(func(context.Context) error { Yield(); return nil }); err == nil {
							err = k.Join()
						}
					case 6:
						var k *VThread
						if k, err = s.Go(func(context.Context) error { Sleep(time.Microsecond); return nil }); err == nil {
							c, cancel := context.WithTimeout(context.Background(), 20*time.Microsecond)
							k.Wait(c)
							cancel()
							err = k.Join()
						}
					}
				})
				if err != nil {
					return fmt.Errorf("round %d: %w", j, err)
				}
			}
			return nil
		}))
	}
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.blocked.Load(); n != 0 {
		t.Errorf("%d carriers counted blocked pinned after every thread ended", n)
	}
	waitUntil(t, "the compensation carriers to retire", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.temp == 0
	})
	if len(criticalPins(s)) == 0 {
		t.Errorf("no pinned wait counted: the test did not test what it means to")
	}
}

// A virtual thread that locks its thread and parks blocks its carrier
// instead of moving to another (pinned, counted under LockedThread); once
// unlocked, it parks as usual.
func TestParkLockedThread(t *testing.T) {
	if _, ok := rt.LockCount(); !ok {
		t.Skip("the thread's LockOSThread count cannot be read here (runtime layout not mirrored), so LockedThread is not detected")
	}
	s := newTest(t, Options{Carriers: 1})
	vt, err := s.Go(func(ctx context.Context) error {
		runtime.LockOSThread()
		Park() // pinned: blocks the carrier until Unpark
		runtime.UnlockOSThread()
		Park() // suspends
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for vt.state.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("state %d, want %d", vt.state.Load(), want)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitState(vtPinned)
	vt.Unpark()
	waitState(vtParked)
	vt.Unpark()
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range s.Pins() {
		if p.Reason == pinning.LockedThread {
			n += p.Count
		}
	}
	if n != 1 {
		t.Fatalf("Pins() = %v, want one LockedThread", s.Pins())
	}
}
