package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// A deterministic AfterFunc armed with a due duration by the last virtual
// thread to end during a draining Shutdown: the thread that ends lets the
// scheduler drain, and the timer then fired at the carrier's next look and
// started f's thread after Shutdown had seen the scheduler drained. When f
// parked (a Sleep), the carrier saw the scheduler drained and exited:
// Shutdown returned nil with a virtual thread still live, parked for good
// (Live 1, f never finished). A timer not yet fired when the last thread
// ends is dropped, as api.md says of a pending one.
func TestDetDueAfterFuncAtDrain(t *testing.T) {
	s, err := New(Options{Deterministic: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var started, finished atomic.Bool
	release := make(chan struct{})
	vt, _ := s.Go(func(context.Context) error {
		<-release // blocks the carrier until Shutdown has begun
		s.AfterFunc(0, func() {
			started.Store(true)
			Sleep(time.Millisecond)
			finished.Store(true)
		})
		return nil
	})
	if err := shutdownReleasing(s, release, false); err != nil {
		t.Fatal(err)
	}
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if n := s.Live(); n != 0 || started.Load() != finished.Load() {
		t.Fatalf("after Shutdown returned nil: Live = %d, AfterFunc's f started %v, finished %v", n, started.Load(), finished.Load())
	}
}

// In deterministic mode a group's context ends with the scheduler's at
// the same point of every run: when a virtual thread cancels
// Options.Context, a child of a group made on another context wakes from
// SleepContext on its group's context at that virtual time. NewGroup tied
// the group's context to the scheduler's with context.AfterFunc, whose
// goroutine cancelled it whenever the Go runtime ran it: the idle carrier
// had usually jumped the clock to the child's timer first, an hour on.
func TestDetGroupCancelledWithScheduler(t *testing.T) {
	const at = time.Second
	for seed := range uint64(20) {
		root, cancelRoot := context.WithCancel(context.Background())
		s := newTest(t, Options{Deterministic: true, Seed: seed, Context: root})
		var elapsed time.Duration
		var sleepErr error
		main := goOrFatal(t, s, func(context.Context) error {
			g, gctx := s.NewGroup(context.Background())
			g.Go(func(context.Context) error {
				start := s.Now()
				sleepErr = SleepContext(gctx, time.Hour)
				elapsed = s.Now().Sub(start)
				return nil
			})
			s.Go(func(context.Context) error {
				Sleep(at)
				cancelRoot()
				return nil
			})
			return g.Wait()
		})
		if err := joinWithin(t, main); err != nil {
			t.Fatal(err)
		}
		if sleepErr != context.Canceled || elapsed != at {
			t.Fatalf("seed %d: a group child's SleepContext(its group's context, 1h) returned %v after %v; the scheduler's context was cancelled at %v", seed, sleepErr, elapsed, at)
		}
	}
}

// A deterministic group's context is still cancelled with the scheduler's
// once the carrier has gone: by a draining Shutdown, which cancels the
// scheduler's context after the carrier has seen the last thread end and
// exited (as it does when that thread ends on the carrier), and by Close.
func TestDetGroupCancelledAfterDrain(t *testing.T) {
	for _, closeIt := range []bool{false, true} {
		s, err := New(Options{Deterministic: true, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		g, gctx := s.NewGroup(context.Background())
		release := make(chan struct{})
		if err := g.Go(func(context.Context) error {
			<-release // blocks the carrier until the shutdown has begun
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := shutdownReleasing(s, release, closeIt); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the group's context to end with the scheduler's", func() bool { return gctx.Err() != nil })
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// In deterministic mode a timer already due when it is made (a duration of
// zero or less) fires at the next pick, as it would at once in real mode,
// without moving the clock: a thread polling for it with Yield does not
// spin for ever.
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
		// f runs in a virtual thread of its own, started at the next
		// pick, and run at a later one the seed chooses: a few Yields.
		if yields > 10 {
			t.Errorf("AfterFunc(%v) fired after %d Yields, want a few", d, yields)
		}
		if got := s.Now().Sub(epoch); got != time.Second {
			t.Errorf("the clock moved to %v, want it left at 1s", got)
		}
	}
}

// In deterministic mode AfterFunc's f runs in a virtual thread of its own,
// so that what it does is part of the seeded interleaving: a select there
// chooses with the seed's generator, not the process's, and is the same
// from run to run with one seed.
func TestDeterministicAfterFuncSelect(t *testing.T) {
	run := func() string {
		s := newTest(t, Options{Deterministic: true, Seed: 1})
		out := ""
		vt, _ := s.Go(func(ctx context.Context) error {
			for range 32 {
				a, b := NewChan[int](1), NewChan[int](1)
				s.AfterFunc(time.Millisecond, func() {
					i, _ := TrySelect(SendCase(a, 1), SendCase(b, 2))
					out += fmt.Sprint(i)
				})
				Sleep(2 * time.Millisecond)
			}
			return nil
		})
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := run()
	for i := 1; i < 20; i++ {
		if got := run(); got != first {
			t.Fatalf("same seed, run %d: the selects in AfterFunc chose %s, run 0 chose %s", i, got, first)
		}
	}
}

// A deterministic AfterFunc's f may block: it parks its own virtual thread
// and does not block the only carrier, and the simulation with it.
func TestDeterministicAfterFuncBlocks(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 3})
	ch := NewChan[int](0)
	got := make(chan int, 1)
	s.AfterFunc(time.Second, func() {
		v, _ := ch.Recv()
		got <- v
	})
	vt, _ := s.Go(func(ctx context.Context) error {
		Sleep(2 * time.Second)
		ch.Send(42)
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if v != 42 {
			t.Fatalf("f received %d, want 42", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("f never received")
	}
}

const afterFuncPanicEnv = "WEFT_TEST_AFTERFUNC_PANIC"

// A panic in a deterministic AfterFunc's f ends the program, as one in
// time.AfterFunc's goroutine does: the virtual thread that runs f must not
// swallow it.
func TestDeterministicAfterFuncPanicEndsProgram(t *testing.T) {
	if os.Getenv(afterFuncPanicEnv) == "1" {
		s, err := New(Options{Deterministic: true, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.AfterFunc(time.Millisecond, func() { panic("boom in AfterFunc") })
		vt, _ := s.Go(func(ctx context.Context) error {
			Sleep(time.Second)
			return nil
		})
		vt.Join()
		time.Sleep(5 * time.Second) // the panic ends the process first
		return
	}
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs a child process, which this platform cannot start")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeterministicAfterFuncPanicEndsProgram$", "-test.count=1")
	cmd.Env = append(os.Environ(), afterFuncPanicEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("panic: boom in AfterFunc")) {
		t.Fatalf("child process: %v, want a crash with the panic\n%s", err, out)
	}
}

// A thread that waits for an AfterFunc's f (a timeout built on the
// scheduler's clock) while a draining Shutdown runs: f runs and the thread
// ends, in real mode (time.AfterFunc's goroutine) and in deterministic
// mode (its virtual thread starts although the scheduler is closing). A
// deterministic AfterFunc that dropped f would keep Shutdown from
// draining.
func TestAfterFuncDuringDrainingShutdown(t *testing.T) {
	for _, det := range []bool{false, true} {
		t.Run(map[bool]string{false: "real", true: "det"}[det], func(t *testing.T) {
			s, err := New(Options{Deterministic: det, Seed: 7, Carriers: 2})
			if err != nil {
				t.Fatal(err)
			}
			// Wait for the test to start Shutdown: no timer is pending,
			// so the deterministic clock cannot run ahead.
			me, vt, fired := goAfterFuncOnce(s, func(context.Context) bool { return s.closing.Load() })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Shutdown(ctx) }()
			for !s.closing.Load() {
				time.Sleep(time.Millisecond)
			}
			me.Unpark()
			if err := <-done; err != nil {
				t.Errorf("Shutdown: %v (AfterFunc fired: %v, thread finished: %v)", err, fired.Load(), vt.finished())
				// Let the thread end so that the carriers exit.
				fired.Store(true)
				me.Unpark()
			}
		})
	}
}

// goAfterFuncOnce starts a thread of s that parks until ready holds (each
// Unpark makes it look), then arms an AfterFunc of 10ms that sets fired
// and unparks it, and parks until fired: a thread waiting on a timeout
// built on the scheduler's clock. It returns once the thread has started.
func goAfterFuncOnce(s *Scheduler, ready func(ctx context.Context) bool) (me, vt *VThread, fired *atomic.Bool) {
	gate := make(chan *VThread, 1)
	fired = new(atomic.Bool)
	vt, _ = s.Go(func(ctx context.Context) error {
		me := Current()
		gate <- me
		for !ready(ctx) {
			Park()
		}
		s.AfterFunc(10*time.Millisecond, func() {
			fired.Store(true)
			me.Unpark()
		})
		for !fired.Load() {
			Park()
		}
		return nil
	})
	return <-gate, vt, fired
}

// The same with Close, which also sets closing first.
func TestAfterFuncDuringClose(t *testing.T) {
	s, err := New(Options{Deterministic: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	me, _, fired := goAfterFuncOnce(s, func(ctx context.Context) bool { return ctx.Err() != nil })
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	for !s.closing.Load() || s.ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	me.Unpark()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Errorf("Close hung: AfterFunc fired: %v", fired.Load())
		fired.Store(true)
		me.Unpark()
		<-done
	}
}

// What api.md says of timers at Shutdown: neither mode waits for one that
// has not fired. A deterministic timer still pending when the last virtual
// thread ends during a Shutdown is dropped (virtual time stops there).
// Without a Shutdown, the clock jumps to a pending timer once nothing can
// run, as ever.
func TestDeterministicTimerPendingAtShutdown(t *testing.T) {
	s, err := New(Options{Deterministic: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var early, late atomic.Bool
	release := make(chan struct{})
	vt, _ := s.Go(func(context.Context) error {
		s.AfterFunc(time.Second, func() { early.Store(true) })
		s.AfterFunc(time.Hour, func() { late.Store(true) })
		Sleep(2 * time.Second)
		<-release // blocks the carrier until Shutdown has begun
		return nil
	})
	if err := shutdownReleasing(s, release, false); err != nil {
		t.Fatal(err)
	}
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if !early.Load() || late.Load() {
		t.Fatalf("the 1s timer fired: %v (want true); the 1h one, pending at Shutdown: %v (want false)", early.Load(), late.Load())
	}

	s2 := newTest(t, Options{Deterministic: true, Seed: 3})
	done := make(chan struct{})
	s2.AfterFunc(time.Hour, func() { close(done) })
	select {
	case <-done: // nothing was runnable: the clock jumped an hour
	case <-time.After(10 * time.Second):
		t.Fatal("a timer pending while the scheduler idles never fired")
	}
	if got := s2.Now().Sub(epoch); got != time.Hour {
		t.Errorf("the clock is at %v, want 1h", got)
	}
}

// shutdownReleasing starts s.Shutdown (or, if closeIt, s.Close) on a
// goroutine, waits until it has begun, closes release, which one of s's
// virtual threads is blocked on holding its carrier, and returns what
// Shutdown or Close returned. Shutdown gives up after 10s.
func shutdownReleasing(s *Scheduler, release chan struct{}, closeIt bool) error {
	shut := make(chan error, 1)
	go func() {
		if closeIt {
			shut <- s.Close()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	for !s.closing.Load() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	return <-shut
}

// detSyncTrace runs a program that uses every synchronisation type on a
// deterministic scheduler and returns its trace.
func detSyncTrace(t *testing.T, seed uint64) []string {
	s := newSched(t, Options{Deterministic: true, Seed: seed})
	var mu sync.Mutex
	var trace []string
	log := func(f string, a ...any) {
		mu.Lock()
		trace = append(trace, fmt.Sprintf("%v ", s.Now().Sub(epoch))+fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	root, _ := s.Go(func(ctx context.Context) error {
		var m Mutex
		var rw RWMutex
		cond := NewCond(&m)
		sem := NewSemaphore(3)
		ch := NewChan[int](1)
		var wg WaitGroup
		turn := 0
		for p := range 6 {
			wg.Go(s, func(context.Context) error {
				for k := range 5 {
					m.Lock()
					log("m %d.%d", p, k)
					Yield()
					m.Unlock()
					if p%2 == 0 {
						rw.RLock()
						log("r %d.%d", p, k)
						Yield()
						rw.RUnlock()
					} else {
						rw.Lock()
						log("w %d.%d", p, k)
						rw.Unlock()
					}
					cctx, cancel := context.WithCancel(context.Background())
					if k == 2 {
						cancel()
					}
					if err := sem.Acquire(cctx, int64(1+p%3)); err == nil {
						log("sem %d.%d", p, k)
						Sleep(time.Duration(p) * time.Microsecond)
						sem.Release(int64(1 + p%3))
					} else {
						log("sem %d.%d %v", p, k, err)
					}
					cancel()
					if ch.SendTimeout(p*10+k, time.Duration(p+1)*time.Microsecond) {
						log("sent %d.%d", p, k)
					}
					var v int
					if i, _ := SelectTimeout(time.Duration(k+1)*time.Microsecond, RecvCase(ch, &v)); i >= 0 {
						log("got %d by %d", v, p)
					}
				}
				m.Lock()
				for turn != p {
					cond.Wait()
				}
				turn++
				log("turn %d", p)
				cond.Broadcast()
				m.Unlock()
				return nil
			})
		}
		wg.Wait()
		return nil
	})
	if err := root.Join(); err != nil {
		t.Fatal(err)
	}
	return trace
}

func TestDetSyncReproducible(t *testing.T) {
	for seed := range uint64(5) {
		a := detSyncTrace(t, seed)
		b := detSyncTrace(t, seed)
		if !reflect.DeepEqual(a, b) {
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Fatalf("seed %d: runs differ at %d: %q vs %q", seed, i, a[i], b[i])
				}
			}
			t.Fatalf("seed %d: runs differ in length %d vs %d", seed, len(a), len(b))
		}
	}
}

// TestDetCloseCancelsWaits: closing a deterministic scheduler
// cancels its threads' contexts, which must end their context waits on
// every type.
func TestDetCloseCancelsWaits(t *testing.T) {
	for _, det := range []bool{false, true} {
		s, err := New(Options{Deterministic: det, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		ch, full, other := NewChan[int](0), NewChan[int](1), NewChan[int](0)
		full.Send(0)
		sem := NewSemaphore(1)
		sem.TryAcquire(1)
		var errs [5]atomic.Value
		var started atomic.Int32
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			_, _, err := ch.RecvContext(ctx)
			errs[0].Store(fmt.Sprint(err))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			errs[1].Store(fmt.Sprint(full.SendContext(ctx, 1)))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			_, _, err := SelectContext(ctx, RecvCase(other, nil), SendCase(full, 2))
			errs[2].Store(fmt.Sprint(err))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			errs[3].Store(fmt.Sprint(sem.Acquire(ctx, 1)))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			errs[4].Store(fmt.Sprint(sem.Acquire(ctx, 5))) // more than the size
			return nil
		})
		for started.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		done := make(chan struct{})
		go func() { s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("det=%v: Close hangs", det)
		}
		for i := range errs {
			if v := errs[i].Load(); v != "context canceled" {
				t.Errorf("det=%v: wait %d: %v", det, i, v)
			}
		}
	}
}

// TestDetSeedsProgress: many seeds of a deterministic program that
// mixes every type; a lost wake-up shows as a hang (every thread parked).
func TestDetSeedsProgress(t *testing.T) {
	for seed := range uint64(iters(300, 60)) {
		s, err := New(Options{Deterministic: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var m Mutex
		var rw RWMutex
		cond := NewCond(&m)
		sem := NewSemaphore(4)
		ch := NewChan[int](1)
		var wg WaitGroup
		var inside, rinside, winside int
		var errs []string
		fail := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
		ready := 0
		for p := range 7 {
			wg.Go(s, func(context.Context) error {
				for k := range 12 {
					switch (p + k) % 4 {
					case 0:
						m.Lock()
					case 1:
						for !m.TryLock() {
							Yield()
						}
					default:
						m.Lock()
					}
					inside++
					if inside != 1 {
						fail("mutex: %d inside", inside)
					}
					if k%3 == 0 {
						Yield()
					}
					inside--
					if k == 5 {
						ready++
						cond.Broadcast()
						for ready < 7 {
							cond.Wait()
						}
					}
					m.Unlock()
					if p%3 == 0 {
						rw.Lock()
						winside++
						if winside != 1 || rinside != 0 {
							fail("rw: %d writers, %d readers", winside, rinside)
						}
						Yield()
						winside--
						rw.Unlock()
					} else if rw.TryRLock() || func() bool { rw.RLock(); return true }() {
						rinside++
						if winside != 0 {
							fail("rw: reader beside a writer")
						}
						Yield()
						rinside--
						rw.RUnlock()
					}
					w := int64(1 + (p+k)%4)
					if sem.Acquire(context.Background(), w) == nil {
						Yield()
						sem.Release(w)
					}
					ch.Send(k) // then Recv: each thread's net is 0 or 1
					ch.Recv()
				}
				return nil
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("seed %d: hangs", seed)
		}
		s.Close()
		if len(errs) > 0 {
			t.Fatalf("seed %d: %v", seed, errs)
		}
	}
}

// TestDetSeedsConservation: on many seeds of a deterministic
// scheduler, timed and cancelled sends and receives (contexts cancelled by
// other virtual threads, so at the same virtual instant as hand-offs)
// never lose or duplicate a value.
func TestDetSeedsConservation(t *testing.T) {
	for seed := range uint64(iters(200, 40)) {
		s, err := New(Options{Deterministic: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		chans := []*Chan[int]{NewChan[int](0), NewChan[int](1), NewChan[int](0)}
		const producers, per = 4, 40
		sent := make([]int, producers*per)
		got := make([]int, producers*per)
		var wg WaitGroup
		var pending WaitGroup
		ctxs := make(chan context.CancelFunc, 1000)
		pending.Add(producers)
		for p := range producers {
			wg.Go(s, func(context.Context) error {
				defer pending.Done()
				for k := range per {
					v := p*per + k
					c := chans[(p+k)%3]
					ok := false
					switch k % 4 {
					case 0:
						ok = c.SendTimeout(v, time.Duration(k%3)*time.Microsecond+1)
					case 1:
						ctx, cancel := context.WithCancel(context.Background())
						ctxs <- cancel
						ok = c.SendContext(ctx, v) == nil
					case 2:
						ctx, cancel := context.WithCancel(context.Background())
						ctxs <- cancel
						i, _, _ := SelectContext(ctx, SendCase(c, v), SendCase(chans[(p+k+1)%3], v))
						ok = i >= 0
					case 3:
						i, _ := SelectTimeout(time.Microsecond, SendCase(c, v))
						ok = i >= 0
					}
					if ok {
						sent[v]++
					}
				}
				return nil
			})
		}
		// The canceller ends the contexts at various points, until the
		// producers are done and no context is left (deterministic mode:
		// nothing runs between a consumer's look at pending and its
		// queueing of a context).
		wg.Go(s, func(context.Context) error {
			for !pendingZero(&pending) || len(ctxs) > 0 {
				select {
				case cancel := <-ctxs:
					Yield()
					cancel()
				default:
					Yield()
				}
			}
			return nil
		})
		for c := range 3 {
			wg.Go(s, func(context.Context) error {
				var vs [3]int
				for k := 0; ; k++ {
					var v int
					okv := false
					switch k % 3 {
					case 0:
						x, ok, ready := chans[(c+k)%3].RecvTimeout(time.Duration(1+k%4) * time.Microsecond)
						v, okv = x, ok && ready
					case 1:
						if pendingZero(&pending) {
							break // the canceller may have gone
						}
						ctx, cancel := context.WithCancel(context.Background())
						ctxs <- cancel
						x, ok, err := chans[(c+k)%3].RecvContext(ctx)
						v, okv = x, ok && err == nil
					case 2:
						i, ok := SelectTimeout(2*time.Microsecond, RecvCase(chans[0], &vs[0]), RecvCase(chans[1], &vs[1]), RecvCase(chans[2], &vs[2]))
						if i >= 0 {
							v, okv = vs[i], ok
						}
					}
					if okv {
						got[v]++
					} else if pendingZero(&pending) {
						// Drain what is left, then stop.
						for _, ch := range chans {
							for {
								x, ok, ready := ch.TryRecv()
								if !ready || !ok {
									break
								}
								got[x]++
							}
						}
						return nil
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("seed %d: hangs", seed)
		}
		s.Close()
		for v := range sent {
			if sent[v] != got[v] {
				t.Fatalf("seed %d: value %d sent %d times, received %d", seed, v, sent[v], got[v])
			}
		}
	}
}

func pendingZero(wg *WaitGroup) bool {
	wg.mu.Lock()
	defer wg.mu.Unlock()
	return wg.n == 0
}

// slowErrCtx is a context whose first Err call, made by the deterministic
// carrier's look at the contexts it watches, cancels it and then returns
// the state it saw on entry after a pause: a cancellation that lands
// between that look and the carrier's sleep, every time. (It keeps the
// Context contract: Err says what held when it was called.)
type slowErrCtx struct {
	context.Context
	done  chan struct{}
	once  sync.Once
	err   atomic.Value
	calls atomic.Int32
}

func (c *slowErrCtx) Done() <-chan struct{} { return c.done }

func (c *slowErrCtx) Err() error {
	e, _ := c.err.Load().(error)
	if c.calls.Add(1) == 1 {
		go c.once.Do(func() {
			c.err.Store(context.Canceled)
			close(c.done)
		})
		time.Sleep(5 * time.Millisecond)
	}
	return e
}

// A deterministic scheduler's carrier does not sleep through a context
// cancelled between its look at the contexts and its sleep: its look
// before sleeping missed ended contexts, and the AfterFunc's wake-up,
// which came before the carrier was idle, was lost.
func TestDeterministicCancelBeforeSleep(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	ctx := &slowErrCtx{Context: context.Background(), done: make(chan struct{})}
	ch := NewChan[int](0)
	vt := goOrFatal(t, s, func(context.Context) error {
		_, _, err := ch.RecvContext(ctx)
		return err
	})
	if !doneWithin(vt, waitTimeout) {
		t.Fatalf("RecvContext did not return within %v of its context's cancellation: the carrier slept through it", waitTimeout)
	}
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Fatalf("RecvContext = %v, want context.Canceled", err)
	}
}

// A park while pinned in deterministic mode blocks the only carrier (there
// is no compensation), is counted in Pins, and ends with an Unpark from
// outside; with its permit there, it does not block.
func TestDeterministicPinnedPark(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 3})
	vt := goOrFatal(t, s, func(context.Context) error {
		pinning.Do(func() { Park() })
		return nil
	})
	waitUntil(t, "the pinned park to be counted", func() bool { return len(s.Pins()) == 1 })
	if pins := s.Pins(); pins[0].Reason != pinning.CriticalSection {
		t.Errorf("Pins = %+v, want the one critical-section pin", pins)
	}
	vt.Unpark()
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	vt = goOrFatal(t, s, func(context.Context) error {
		pinning.Do(func() {
			Current().Unpark()
			Park()
		})
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatalf("a pinned park with its permit there: %v", err)
	}
}

// The virtual clock does not overflow: a timer for a duration that would
// take it past the largest time waits as if for ever: it does not wrap
// around, fire at once and move the clock back.
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

// detCancelTrace runs, deterministically, a group in which one child fails
// while another waits on the group's context and a third ticks the clock,
// and returns what happened when.
func detCancelTrace(t *testing.T, seed uint64) string {
	s, err := New(Options{Deterministic: true, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var trace []string
	logf := func(f string, a ...any) {
		trace = append(trace, fmt.Sprintf("%v ", s.Now().Sub(epoch))+fmt.Sprintf(f, a...))
	}
	main := goOrFatal(t, s, func(ctx context.Context) error {
		// A virtual thread outside the group that ends after it: only
		// the group's context ends a Wait for it.
		hold := NewChan[int](0)
		held, err := s.Go(func(ctx context.Context) error {
			hold.Recv()
			return nil
		})
		if err != nil {
			return err
		}
		defer hold.Close()
		g, gctx := s.NewGroup(ctx)
		ch := NewChan[int](0)
		g.Go(func(ctx context.Context) error {
			_, _, err := ch.RecvContext(gctx)
			logf("receiver woke: %v", err)
			return nil
		})
		g.Go(func(ctx context.Context) error {
			err := held.Wait(gctx)
			logf("waiter woke: %v", err)
			return nil
		})
		g.Go(func(ctx context.Context) error {
			Sleep(time.Millisecond)
			logf("failing")
			return errors.New("fail")
		})
		g.Go(func(ctx context.Context) error {
			for i := range 10 {
				Sleep(time.Millisecond)
				logf("tick %d", i)
			}
			return nil
		})
		g.Wait()
		return nil
	})
	if err := main.Join(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(trace, "\n")
}

// In deterministic mode a context cancelled by one of the scheduler's own
// virtual threads wakes its waiters at the same point in every run: not
// through context.AfterFunc's goroutine, whenever the Go runtime runs it,
// while the virtual clock goes on.
func TestDeterministicContextCancel(t *testing.T) {
	first := detCancelTrace(t, 42)
	if !strings.Contains(first, "receiver woke: context canceled") || !strings.Contains(first, "waiter woke: context canceled") {
		t.Fatalf("the waiters were not woken by the group's cancellation:\n%s", first)
	}
	runs := 100
	if testing.Short() {
		runs = 20
	}
	for i := range runs {
		if got := detCancelTrace(t, 42); got != first {
			t.Fatalf("run %d with the same seed interleaved differently:\n%s\nwant:\n%s", i+1, got, first)
		}
	}
}

// The virtual clock never goes back, not for a negative duration either.
func TestDeterministicClockMonotonic(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	var before, after time.Time
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		Sleep(time.Second)
		before = s.Now()
		self := Current()
		var fired atomic.Bool
		s.AfterFunc(-500*time.Millisecond, func() { fired.Store(true); self.Unpark() })
		for !fired.Load() {
			Park()
		}
		after = s.Now()
		return nil
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if after.Before(before) {
		t.Fatalf("the virtual clock went back: %v, then %v", before.Sub(epoch), after.Sub(epoch))
	}
}

func TestDeterministicSleep(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	var order []int
	// Started from one root virtual thread, so that the virtual clock
	// cannot move on between two of the Go calls.
	root, _ := s.Go(func(ctx context.Context) error {
		var vts []*VThread
		for i := 3; i >= 1; i-- {
			vt, _ := s.Go(func(ctx context.Context) error {
				Sleep(time.Duration(i) * time.Hour)
				order = append(order, i)
				return nil
			})
			vts = append(vts, vt)
		}
		for _, vt := range vts {
			vt.Join()
		}
		return nil
	})
	root.Join()
	if len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3 {
		t.Fatalf("woke in order %v", order)
	}
}

// A timer armed from a plain goroutine on an idle deterministic scheduler
// fires: the virtual clock jumps to it, as it does for virtual threads'
// timers, instead of the carrier sleeping on with a timer pending.
func TestDeterministicTimerFromGoroutine(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	vt, _ := s.Go(func(ctx context.Context) error { return nil })
	vt.Join()
	for i := range 20 {
		time.Sleep(time.Millisecond) // let the carrier go to sleep
		start := s.Now()
		fired := make(chan time.Time, 1)
		s.AfterFunc(time.Hour, func() { fired <- s.Now() })
		select {
		case at := <-fired:
			if got := at.Sub(start); got != time.Hour {
				t.Fatalf("round %d: fired after %v of virtual time, want 1h", i, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a timer armed from a goroutine never fired", i)
		}
	}
}
