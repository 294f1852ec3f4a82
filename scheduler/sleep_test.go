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

	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/pinning"
)

// hour is a sleep that no test waits out: a test that returns at all
// shows that something ended it.
const hour = time.Hour

// A virtual thread in SleepContext on its own context, for an hour, lets
// Close return: Close cancels the context and the sleep ends with
// context.Canceled. No goroutine is left behind. (Not in deterministic
// mode, whose clock jumps the hour as soon as nothing else is runnable.)
func TestSleepContextCloseInterrupts(t *testing.T) {
	base := goroutines.Settled()
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		return SleepContext(ctx, hour)
	})
	// Parked in the sleep, not cancelled before it began.
	waitUntil(t, "the sleeper to park", func() bool { return vt.state.Load() == vtParked })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits after 10 s on a thread in SleepContext(its context, 1 hour)")
	}
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Errorf("SleepContext = %v, want context.Canceled", err)
	}
	waitUntil(t, "the carriers to exit", func() bool { return goroutines.Settled() <= base })
}

// So does a Shutdown whose context ends: it cancels the sleeper's
// context, and the carriers exit.
func TestSleepContextShutdownInterrupts(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		return SleepContext(ctx, hour)
	})
	waitUntil(t, "the sleeper to park", func() bool { return vt.state.Load() == vtParked })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want its context's deadline", err)
	}
	if !doneWithin(vt, 10*time.Second) {
		t.Fatal("a thread in SleepContext(its context, 1 hour) still sleeps 10 s after Shutdown cancelled it")
	}
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Fatalf("SleepContext = %v, want context.Canceled", err)
	}
}

// In deterministic mode SleepContext sleeps on the virtual clock: a
// context cancelled by another virtual thread at virtual time T ends the
// sleep at T, and one never cancelled lets it end at d exactly. Either
// way it leaves no timer and no watch on its context behind.
func TestSleepContextDeterministic(t *testing.T) {
	const at = 90 * time.Second
	for seed := range uint64(8) {
		s := newTest(t, Options{Deterministic: true, Seed: seed})
		ctx, cancel := context.WithCancel(context.Background())
		var elapsed time.Duration
		var timers, watches int
		vts := goAll(t, s, func(context.Context) error {
			start := s.Now()
			err := SleepContext(ctx, hour)
			elapsed = s.Now().Sub(start)
			// Counted while this thread runs: an idle carrier would
			// advance the clock to a timer left behind, and fire it.
			timers, watches = detRegistered(s)
			return err
		}, func(context.Context) error {
			Sleep(at)
			cancel()
			return nil
		})
		if err := joinWithin(t, vts[0]); !errors.Is(err, context.Canceled) {
			t.Fatalf("seed %d: SleepContext = %v, want context.Canceled", seed, err)
		}
		if elapsed != at {
			t.Errorf("seed %d: SleepContext cancelled at virtual time %v returned after %v", seed, at, elapsed)
		}
		if timers != 0 || watches != 0 {
			t.Errorf("seed %d: %d timers and %d context watches still registered after a cancelled SleepContext returned", seed, timers, watches)
		}

		// Not cancelled: it returns nil once d has passed, not before.
		ctx2, cancel2 := context.WithCancel(context.Background())
		var permitAfter bool
		vt := goOrFatal(t, s, func(context.Context) error {
			start := s.Now()
			if err := SleepContext(ctx2, time.Minute); err != nil {
				return err
			}
			elapsed = s.Now().Sub(start)
			timers, watches = detRegistered(s)
			// A watch left on ctx2 would unpark this thread now.
			cancel2()
			Yield()
			permitAfter = Current().permit.Load()
			return nil
		})
		if err := joinWithin(t, vt); err != nil {
			t.Fatalf("seed %d: SleepContext(not cancelled) = %v", seed, err)
		}
		if elapsed != time.Minute {
			t.Errorf("seed %d: SleepContext(1 minute) returned nil after %v", seed, elapsed)
		}
		if permitAfter {
			t.Errorf("seed %d: cancelling a context after SleepContext returned unparked the thread: its watch was left registered", seed)
		}
		if timers != 0 || watches != 0 {
			t.Errorf("seed %d: %d timers and %d context watches still registered after SleepContext returned nil", seed, timers, watches)
		}
	}
}

// goAll starts fns as virtual threads of s from inside another, and
// returns them. In deterministic mode the carrier then runs none of them
// before all have started: started from a plain goroutine one by one, the
// first could park on a timer and the idle carrier advance the virtual
// clock to it before the next had started.
func goAll(t *testing.T, s *Scheduler, fns ...func(context.Context) error) []*VThread {
	t.Helper()
	vts := make([]*VThread, len(fns))
	root := goOrFatal(t, s, func(context.Context) error {
		for i, fn := range fns {
			vt, err := s.Go(fn)
			if err != nil {
				return err
			}
			vts[i] = vt
		}
		return nil
	})
	if err := joinWithin(t, root); err != nil {
		t.Fatalf("Go: %v", err)
	}
	return vts
}

// detRegistered counts the timers and context watches of a deterministic
// scheduler that are neither stopped nor fired.
func detRegistered(s *Scheduler) (timers, watches int) {
	d := s.det
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.timers {
		if !t.stopped && !t.fired {
			timers++
		}
	}
	for _, w := range d.watches {
		if !w.done {
			watches++
		}
	}
	return timers, watches
}

// When d passes and the context ends at the same virtual time, the
// context wins if it has ended by the time the sleeper runs: SleepContext
// returns nil only if it had not. Which of the two threads runs first
// depends on the seed; the result must agree with it, seed by seed.
func TestSleepContextTie(t *testing.T) {
	const at = time.Second
	sawNil, sawCanceled := false, false
	for seed := range uint64(32) {
		s := newTest(t, Options{Deterministic: true, Seed: seed})
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled atomic.Bool
		var endedAfterCancel bool
		vts := goAll(t, s, func(context.Context) error {
			err := SleepContext(ctx, at)
			endedAfterCancel = cancelled.Load()
			return err
		}, func(context.Context) error {
			Sleep(at)
			cancel()
			cancelled.Store(true)
			return nil
		})
		err := joinWithin(t, vts[0])
		switch {
		case endedAfterCancel && !errors.Is(err, context.Canceled):
			t.Errorf("seed %d: the context was cancelled before the sleeper ran again, and SleepContext = %v, want context.Canceled", seed, err)
		case !endedAfterCancel && err != nil:
			t.Errorf("seed %d: the sleeper ran again before the cancel, and SleepContext = %v, want nil", seed, err)
		}
		sawNil = sawNil || err == nil
		sawCanceled = sawCanceled || err != nil
	}
	if !sawNil || !sawCanceled {
		t.Errorf("the seeds covered one order only (nil: %v, cancelled: %v): pick others", sawNil, sawCanceled)
	}
}

// An Unpark that SleepContext's parks used up is given back, as Sleep
// does (TestSleepKeepsUnpark): one before the sleep, one during a sleep
// that d ends, and one during a sleep that its context ends.
func TestSleepContextKeepsUnpark(t *testing.T) {
	for _, det := range []bool{false, true} {
		s := newTest(t, Options{Carriers: 1, Deterministic: det, Seed: 1})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		before := goOrFatal(t, s, func(context.Context) error {
			Current().Unpark()
			if err := SleepContext(ctx, time.Millisecond); err != nil {
				return err
			}
			Park()
			return nil
		})
		if err := joinWithin(t, before); err != nil {
			t.Fatalf("det=%v, Unpark before: %v", det, err)
		}

		for _, byCtx := range []bool{false, true} {
			sctx, scancel := context.WithCancel(context.Background())
			var sleeper atomic.Pointer[VThread]
			// Long enough that the Unpark does not come with the
			// timer's, which would merge the two.
			d := 100 * time.Millisecond
			if byCtx {
				d = hour
			}
			var sleepErr error
			vts := goAll(t, s, func(context.Context) error {
				sleeper.Store(Current())
				sleepErr = SleepContext(sctx, d)
				Park()
				return nil
			}, func(context.Context) error {
				for sleeper.Load() == nil || sleeper.Load().state.Load() != vtParked {
					Yield()
				}
				vt := sleeper.Load()
				vt.Unpark()
				if !byCtx {
					return nil
				}
				// Once the sleeper has used the Unpark up and parked
				// again, the context ends its sleep.
				for vt.state.Load() != vtParked || vt.permit.Load() {
					Yield()
				}
				scancel()
				return nil
			})
			if err := joinWithin(t, vts[1]); err != nil {
				t.Fatal(err)
			}
			if err := joinWithin(t, vts[0]); err != nil {
				t.Fatalf("det=%v byCtx=%v: %v", det, byCtx, err)
			}
			scancel()
			if byCtx && !errors.Is(sleepErr, context.Canceled) {
				t.Errorf("det=%v: SleepContext = %v, want context.Canceled", det, sleepErr)
			}
			if !byCtx && sleepErr != nil {
				t.Errorf("det=%v: SleepContext = %v, want nil", det, sleepErr)
			}
		}
	}
}

// A context that has already ended returns its error at once, whatever d,
// in a virtual thread and in a plain goroutine; in deterministic mode the
// clock does not move.
func TestSleepContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{-1, 0, hour} {
		if err := SleepContext(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("goroutine, d=%v: SleepContext = %v, want context.Canceled", d, err)
		}
	}
	s := newTest(t, Options{Deterministic: true, Seed: 5})
	var moved time.Duration
	vt := goOrFatal(t, s, func(context.Context) error {
		start := s.Now()
		for _, d := range []time.Duration{-1, 0, hour} {
			if err := SleepContext(ctx, d); !errors.Is(err, context.Canceled) {
				return err
			}
		}
		moved = s.Now().Sub(start)
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatalf("SleepContext with a done context = %v, want context.Canceled", err)
	}
	if moved != 0 {
		t.Errorf("the virtual clock moved %v over SleepContexts with a done context", moved)
	}
}

// From a plain goroutine SleepContext sleeps on the wall clock: nil once
// d has passed (and not before), the context's error when it ends first.
func TestSleepContextOutside(t *testing.T) {
	const d = 20 * time.Millisecond
	start := time.Now()
	if err := SleepContext(context.Background(), d); err != nil {
		t.Fatalf("SleepContext(Background, %v) = %v", d, err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("SleepContext(Background, %v) returned nil after %v", d, el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start = time.Now()
	if err := SleepContext(ctx, d); err != nil {
		t.Fatalf("SleepContext(%v) = %v", d, err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("SleepContext(%v) returned nil after %v", d, el)
	}
	if err := SleepContext(ctx, 0); err != nil {
		t.Errorf("SleepContext(0) = %v", err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		cancel()
	}()
	res := make(chan error, 1)
	go func() { res <- SleepContext(ctx, hour) }()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled SleepContext = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SleepContext(1 hour) from a goroutine still sleeps 10 s after its context was cancelled")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer dcancel()
	go func() { res <- SleepContext(dctx, hour) }()
	select {
	case err := <-res:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("SleepContext past its context's deadline = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SleepContext(1 hour) from a goroutine still sleeps 10 s after its context's deadline")
	}
}

// opaqueCtx is a context that context.AfterFunc cannot register with
// directly, as it can with the standard library's: it watches it with a
// goroutine of its own, which only its stop function or the end of the
// context ends.
type opaqueCtx struct {
	context.Context
	done chan struct{}
}

func (c opaqueCtx) Done() <-chan struct{} { return c.done }

func (c opaqueCtx) Value(any) any { return nil }

func (c opaqueCtx) Err() error {
	if isDone(c.done) {
		return context.Canceled
	}
	return nil
}

// SleepContext stops its watch on the context when d ends the sleep: many
// sleeps on a context that never ends leave no goroutine behind.
// (TestSleepContextDeterministic checks that no timer or watch stays
// registered, where the virtual clock makes that exact.)
func TestSleepContextNoLeak(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	ctx := opaqueCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(ctx.done)
	base := goroutines.Settled()
	const n = 50
	vts := make([]*VThread, 0, n)
	for range n {
		vts = append(vts, goOrFatal(t, s, func(context.Context) error {
			return SleepContext(ctx, 100*time.Microsecond)
		}))
	}
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	if got := goroutines.Settled(); got > base {
		t.Errorf("%d goroutines after %d SleepContexts that d ended, %d before: their context watches were left running", got, n, base)
	}

}

// Durations of zero or less return at once (Sleep yields, a timeout is a
// try), and the largest ones neither overflow into the past nor keep a
// wait that something else ends from ending; AfterFunc(0) and
// AfterFunc(-1) run f soon, and a timer of MaxInt64 is still pending for
// Stop to stop, as with package time.
func TestTimerDurations(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		ran := make(chan struct{})
		s.AfterFunc(d, func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(waitTimeout):
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
func TestPinnedSleep(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1})
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
func TestTimeoutsConserveValues(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 3, MaxCompensation: 16})
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

// An Unpark that comes during a Sleep, after the timer has woken the
// sleeper but before the sleeper runs again, is not lost: the next Park
// returns at once, as Sleep's doc says. The timer (and SleepContext's
// context watch) wake the sleeper by its state (wakeTimer), so the permit
// stands for other Unparks only: one permit for both wake-ups would be
// cleared by the park after the yield.
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

func TestSleepAndJoinFromVThread(t *testing.T) {
	s := newTest(t, Options{})
	vt, _ := s.Go(func(ctx context.Context) error {
		child, _ := s.Go(func(ctx context.Context) error {
			Sleep(5 * time.Millisecond)
			return errors.New("child")
		})
		start := time.Now()
		err := child.Join()
		if time.Since(start) < 4*time.Millisecond {
			return errors.New("joined too early")
		}
		return err
	})
	if err := vt.Join(); err == nil || err.Error() != "child" {
		t.Fatalf("Join = %v", err)
	}
}
