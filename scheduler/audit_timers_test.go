package scheduler

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// Tests from an audit of time outside deterministic mode (Sleep,
// SleepContext, the timeouts, AfterFunc), which found the paths sound.
// They hold what it checked: no assertion on how long anything took but
// "not before d".

// Durations of zero or less return at once (Sleep yields, a timeout is a
// try), and the largest ones neither overflow into the past nor keep a
// wait that something else ends from ending; AfterFunc(0) and
// AfterFunc(-1) run f soon, and a timer of MaxInt64 is still pending for
// Stop to stop, as with package time.
func TestAuditTimerDurations(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		ran := make(chan struct{})
		s.AfterFunc(d, func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(proofTimeout):
			t.Fatalf("AfterFunc(%v, f): f did not run", d)
		}
	}
	tm := s.AfterFunc(math.MaxInt64, func() { t.Error("AfterFunc(MaxInt64, f) ran f") })
	if !tm.Stop() {
		t.Error("Stop of AfterFunc(MaxInt64) = false: the timer fired, its deadline having overflowed into the past")
	}
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		ch := NewChan[int](0)
		for _, d := range []time.Duration{0, -1, math.MinInt64} {
			Sleep(d)
			if err := SleepContext(ctx, d); err != nil {
				return err
			}
			if _, _, ready := ch.RecvTimeout(d); ready {
				return errors.New("RecvTimeout on an empty channel was ready")
			}
			if ch.SendTimeout(1, d) {
				return errors.New("SendTimeout with no receiver sent")
			}
			if i, _ := SelectTimeout(d, RecvCase(ch, nil)); i != -1 {
				return errors.New("SelectTimeout on an empty channel chose a case")
			}
		}
		// The largest durations: something else ends each wait.
		c, cancel := context.WithCancel(ctx)
		go func() { time.Sleep(time.Millisecond); cancel() }()
		if err := SleepContext(c, math.MaxInt64); !errors.Is(err, context.Canceled) {
			return errors.New("SleepContext(MaxInt64) did not end with its context: " + errorString(err))
		}
		go func() { time.Sleep(time.Millisecond); ch.Send(7) }()
		if v, ok, ready := ch.RecvTimeout(math.MaxInt64); !ready || !ok || v != 7 {
			return errors.New("RecvTimeout(MaxInt64) did not take the value sent")
		}
		go func() { time.Sleep(time.Millisecond); ch.Recv() }()
		if i, _ := SelectTimeout(math.MaxInt64, SendCase(ch, 8)); i != 0 {
			return errors.New("SelectTimeout(MaxInt64) did not send")
		}
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
}

func errorString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// A pinned Sleep blocks its carrier, not the scheduler: on one carrier, a
// compensation carrier runs the others meanwhile (a thread that ends a
// pinned SleepContext runs while it sleeps), and a pinned Sleep lasts at
// least d.
func TestAuditPinnedSleep(t *testing.T) {
	s := proofSched(t, Options{Carriers: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var asleep atomic.Bool
	sleeper := goOrFatal(t, s, func(context.Context) error {
		var err error
		pinning.Do(func() {
			asleep.Store(true)
			err = SleepContext(ctx, hour)
		})
		if !errors.Is(err, context.Canceled) {
			return errors.New("pinned SleepContext = " + errorString(err) + ", want context.Canceled")
		}
		const d = 5 * time.Millisecond
		start := time.Now()
		pinning.Do(func() { Sleep(d) })
		if el := time.Since(start); el < d {
			return errors.New("a pinned Sleep(5ms) returned after " + el.String())
		}
		return nil
	})
	// Another thread, on the same scheduler, runs while the sleeper
	// holds the only carrier, and ends its sleep.
	waker := goOrFatal(t, s, func(context.Context) error {
		for !asleep.Load() || sleeper.state.Load() != vtPinned {
			Sleep(100 * time.Microsecond)
		}
		cancel()
		return nil
	})
	if err := joinWithin(t, waker); err != nil {
		t.Fatal(err)
	}
	if err := joinWithin(t, sleeper); err != nil {
		t.Fatal(err)
	}
	if len(criticalPins(s)) == 0 {
		t.Error("no pinned wait counted: the test did not test what it means to")
	}
}

// Timeouts race deliveries on several carriers, pinned and not, with
// stray Unparks from goroutines: every value a SendTimeout or a select
// reported sent is received exactly once (a timeout that fired as the
// value was taken neither loses it nor delivers it twice), and every wait
// ends.
func TestAuditTimeoutsConserveValues(t *testing.T) {
	s := proofSched(t, Options{Carriers: 3, MaxCompensation: 16})
	chs := []*Chan[int]{NewChan[int](0), NewChan[int](1), NewChan[int](0)}
	var sent, recvd, sentSum, recvSum atomic.Int64
	took := func(x int) { recvd.Add(1); recvSum.Add(int64(x)) }
	gave := func(v int) { sent.Add(1); sentSum.Add(int64(v)) }
	var helpers sync.WaitGroup
	defer helpers.Wait()
	rounds := 150
	if testing.Short() {
		rounds = 50
	}
	var vts []*VThread
	for i := range 8 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
			me := Current()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range rounds {
				v := i*10000 + j + 1
				d := time.Duration(r.IntN(40)) * time.Microsecond
				if r.IntN(5) == 0 {
					helpers.Go(me.Unpark) // a stray wake-up
				}
				body := func() {
					var x int
					switch r.IntN(4) {
					case 0:
						Sleep(d)
					case 1:
						if chs[r.IntN(len(chs))].SendTimeout(v, d) {
							gave(v)
						}
					case 2:
						if x, ok, ready := chs[r.IntN(len(chs))].RecvTimeout(d); ready && ok {
							took(x)
						}
					case 3:
						switch k, _ := SelectTimeout(d, RecvCase(chs[0], &x), SendCase(chs[1], v), RecvCase(chs[2], &x), RecvCase(chs[1], &x), SendCase(chs[2], v), SendCase(chs[0], v)); k {
						case 0, 2, 3:
							took(x)
						case 1, 4, 5:
							gave(v)
						}
					}
				}
				if r.IntN(4) == 0 {
					pinning.Do(body)
				} else {
					body()
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
	for _, c := range chs {
		for {
			x, ok, ready := c.TryRecv()
			if !ready || !ok {
				break
			}
			took(x)
		}
	}
	if sent.Load() != recvd.Load() || sentSum.Load() != recvSum.Load() {
		t.Errorf("%d values sent (sum %d), %d received (sum %d)", sent.Load(), sentSum.Load(), recvd.Load(), recvSum.Load())
	}
}
