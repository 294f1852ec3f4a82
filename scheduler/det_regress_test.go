package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
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
// used to choose with the process's random generator (f ran on the
// carrier, where no virtual thread is current), and differed from run to
// run with one seed.
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
// (it used to block the only carrier, and the simulation with it).
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
// first version of the deterministic AfterFunc dropped f then, and
// Shutdown never drained (found by a review).
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
