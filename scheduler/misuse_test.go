package scheduler

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestNilAndZeroSchedulerPanicClearly: every method of a nil *Scheduler (as
// New returns with an error) and of a zero Scheduler panics with a message
// that names the method and the mistake: not a nil dereference, nor, for a
// zero Scheduler, a virtual thread that no carrier would ever run (its
// Join would hang) or Shutdown's "close of nil channel".
func TestNilAndZeroSchedulerPanicClearly(t *testing.T) {
	fn := func(context.Context) error { return nil }
	calls := map[string]func(s *Scheduler){
		"Go":        func(s *Scheduler) { s.Go(fn) },
		"GoNamed":   func(s *Scheduler) { s.GoNamed("x", fn) },
		"NewGroup":  func(s *Scheduler) { s.NewGroup(context.Background()) },
		"AfterFunc": func(s *Scheduler) { s.AfterFunc(time.Hour, func() {}) },
		"Now":       func(s *Scheduler) { s.Now() },
		"Pins":      func(s *Scheduler) { s.Pins() },
		"Live":      func(s *Scheduler) { s.Live() },
		"Shutdown":  func(s *Scheduler) { s.Shutdown(context.Background()) },
		"Close":     func(s *Scheduler) { s.Close() },
	}
	for name, call := range calls {
		msg := mustPanic(t, func() { call(nil) })
		if !strings.Contains(msg, "Scheduler."+name+" on a nil *Scheduler") || !strings.Contains(msg, "New") {
			t.Errorf("%s on a nil *Scheduler panicked with %q", name, msg)
		}
		msg = mustPanic(t, func() { call(new(Scheduler)) })
		if !strings.Contains(msg, "Scheduler."+name+" on a zero Scheduler") || !strings.Contains(msg, "New") {
			t.Errorf("%s on a zero Scheduler panicked with %q", name, msg)
		}
	}
	// WaitGroup.Go checks before it adds to the counter.
	for _, s := range []*Scheduler{nil, new(Scheduler)} {
		var wg WaitGroup
		msg := mustPanic(t, func() { wg.Go(s, fn) })
		if !strings.Contains(msg, "WaitGroup.Go with a") || !strings.Contains(msg, "Scheduler") {
			t.Errorf("WaitGroup.Go with %p panicked with %q", s, msg)
		}
		wg.mu.Lock()
		n := wg.n
		wg.mu.Unlock()
		if n != 0 {
			t.Errorf("WaitGroup.Go that panicked left the counter at %d", n)
		}
	}
}

// TestWaitGroupReusedBeforeWaitReturned: a WaitGroup may start a new round
// (Add after the counter reached zero) while a Wait of the last round has
// not returned yet, where sync.WaitGroup panics ("WaitGroup is reused
// before previous Wait has returned"): here the Wait was released when the
// counter reached zero, and returns, and the new round's Waits wait for
// the new round.
func TestWaitGroupReusedBeforeWaitReturned(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	var wg WaitGroup
	wg.Add(1)
	queued := func() bool { wg.mu.Lock(); defer wg.mu.Unlock(); return !wg.q.empty() }
	var returned, busy, hogging atomic.Bool
	defer busy.Store(false) // on a failure too
	waiter := goOrFatal(t, s, func(context.Context) error {
		wg.Wait()
		returned.Store(true)
		return nil
	})
	waitUntil(t, "the first Wait to queue", queued)
	busy.Store(true)
	hog := goOrFatal(t, s, func(context.Context) error {
		hogging.Store(true)
		for busy.Load() {
			// Spins on the only carrier: the woken waiter cannot run.
			// A call that yields: a loop without one is never preempted under
			// GODEBUG=gccheckmark=1, and a collection would wait for it for ever.
			runtime.Gosched()
		}
		return nil
	})
	waitUntil(t, "the carrier to be busy", hogging.Load)
	wg.Done() // releases the first Wait, which cannot run yet
	wg.Add(1) // a new round, before that Wait has returned
	if returned.Load() {
		t.Fatal("the first Wait returned while its carrier was busy")
	}
	second := make(chan struct{})
	go func() { wg.Wait(); close(second) }()
	waitUntil(t, "the second Wait to queue", queued)
	busy.Store(false)
	if err := hog.Join(); err != nil {
		t.Fatal(err)
	}
	if err := joinWithin(t, waiter); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second:
		t.Fatal("a Wait of the new round returned with its counter at 1")
	default:
	}
	wg.Done()
	waitDone(t, second, waitTimeout, "the second round's Wait")
}

// copyCond copies *src into *dst as an assignment would, without the
// assignment that go vet's copylocks reports.
func copyCond(dst, src *Cond) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// TestCondCopiedPanics: a Cond copied after first use panics in Wait,
// Signal and Broadcast, as sync.Cond's copyChecker makes it, before it
// changes anything (Wait leaves L locked); a copy shares its original's
// queue, so a Signal on one could take a waiter that the other's Signal
// then spent a wake-up on. A Cond copied before first use is fine.
func TestCondCopiedPanics(t *testing.T) {
	var m Mutex
	orig := NewCond(&m)
	orig.Signal() // first use
	var copied Cond
	copyCond(&copied, orig)
	for name, f := range map[string]func(){
		"Signal":    copied.Signal,
		"Broadcast": copied.Broadcast,
	} {
		if msg := mustPanic(t, f); !strings.Contains(msg, "Cond is copied") {
			t.Errorf("%s of a copied Cond panicked with %q, want a message that it is copied", name, msg)
		}
	}
	m.Lock()
	waited := make(chan string, 1)
	go func() {
		defer func() { waited <- fmt.Sprint(recover()) }()
		copied.Wait()
	}()
	select {
	case msg := <-waited:
		if !strings.Contains(msg, "Cond is copied") {
			t.Errorf("Wait of a copied Cond panicked with %q, want a message that it is copied", msg)
		}
	case <-time.After(waitTimeout):
		// It waits, on the copy's queue: let it go.
		copyCond(orig, &copied)
		orig.Signal()
		<-waited
		t.Fatal("Wait of a copied Cond waited instead of panicking")
	}
	if m.TryLock() {
		t.Error("Wait of a copied Cond unlocked L before it panicked")
	}
	m.Unlock()
	orig.Broadcast() // the original goes on

	fresh := NewCond(&m)
	var early Cond
	copyCond(&early, fresh) // before first use: allowed
	early.Signal()
	fresh.Signal()
}

// TestCondNilLocker: Wait on a Cond without L (a zero Cond, or NewCond(nil))
// panics saying so, and leaves no waiter queued for a Signal to spend
// itself on; it was a nil dereference.
func TestCondNilLocker(t *testing.T) {
	for name, c := range map[string]*Cond{"zero": new(Cond), "NewCond(nil)": NewCond(nil)} {
		if msg := mustPanic(t, c.Wait); !strings.Contains(msg, "Cond.Wait") || !strings.Contains(msg, "nil L") {
			t.Errorf("%s: Wait panicked with %q, want a message about a nil L", name, msg)
		}
		c.mu.Lock()
		empty := c.q.empty()
		c.mu.Unlock()
		if !empty {
			t.Errorf("%s: Wait that panicked left a waiter queued", name)
		}
	}
}

// TestShutdownNilContext: Shutdown(nil) panics saying so before it changes
// anything: the scheduler is not left closing, refusing new threads while
// its carriers run on.
func TestShutdownNilContext(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	if msg := mustPanic(t, func() { s.Shutdown(nil) }); !strings.Contains(msg, "Shutdown with a nil Context") {
		t.Errorf("Shutdown(nil) panicked with %q", msg)
	}
	vt, err := s.Go(func(context.Context) error { return nil })
	if err != nil {
		t.Fatalf("Go after a Shutdown(nil) that panicked: %v, want the scheduler untouched", err)
	}
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
}

// TestWaitNilContext: VThread.Wait(nil) panics saying so, from a goroutine
// and from a virtual thread, where it was a nil dereference (from a
// virtual thread, after queueing a joiner, which the end of the awaited
// thread then unparked spuriously).
func TestWaitNilContext(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	release := NewChan[int](0)
	target := goOrFatal(t, s, func(context.Context) error { release.Recv(); return nil })
	check := func(where string) {
		if msg := mustPanic(t, func() { target.Wait(nil) }); !strings.Contains(msg, "VThread.Wait with a nil Context") {
			t.Errorf("%s: Wait(nil) panicked with %q", where, msg)
		}
	}
	check("goroutine")
	waiter := goOrFatal(t, s, func(context.Context) error { check("virtual thread"); return nil })
	if err := joinWithin(t, waiter); err != nil {
		t.Fatal(err)
	}
	release.Close()
	if err := joinWithin(t, target); err != nil {
		t.Fatal(err)
	}
}

// TestGroupMisuseMessages: Group.Go with a nil function names Group.Go
// (it said scheduler.Go), and Group.Wait from one of the group's own
// children panics at once, saying why, failing the group, where it
// panicked that a virtual thread cannot Join itself, and that only after
// joining every child started after the caller.
func TestGroupMisuseMessages(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	g, gctx := s.NewGroup(context.Background())
	if msg := mustPanic(t, func() { g.Go(nil) }); !strings.Contains(msg, "Group.Go") || !strings.Contains(msg, "nil function") {
		t.Errorf("Group.Go(nil) panicked with %q", msg)
	}
	release := NewChan[int](0)
	if err := g.Go(func(context.Context) error { release.Recv(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := g.Go(func(context.Context) error { return g.Wait() }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gctx.Done():
		var pe *PanicError
		if err := context.Cause(gctx); !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "Group.Wait") || !strings.Contains(fmt.Sprint(pe.Value), "own children") {
			t.Errorf("Group.Wait from a child: the group failed with %v, want a panic that says why", err)
		}
	case <-time.After(waitTimeout):
		t.Error("Group.Wait from a child waited for the group's other children instead of panicking")
	}
	release.Close()
	g.Wait()
}

// TestNilContextPanicsClearly: the calls that take a context panic,
// saying so, when given a nil one, from a goroutine and from a virtual
// thread, before they do anything. The Chan and Select variants do not
// take nil for "no context" (and wait for ever where they have to wait),
// and Semaphore.Acquire and SleepContext do not dereference nil.
func TestNilContextPanicsClearly(t *testing.T) {
	var nilCtx context.Context
	// Each call gets things it could complete with at once, so that none
	// waits before the fix, and reports whether it did its work.
	full := func() *Chan[int] { c := NewChan[int](1); c.Send(1); return c }
	calls := map[string]func() (worked func() bool){
		"Chan.SendContext": func() func() bool {
			c := NewChan[int](1)
			return func() bool { c.SendContext(nilCtx, 1); return c.Len() == 1 }
		},
		"Chan.RecvContext": func() func() bool {
			c := full()
			return func() bool { c.RecvContext(nilCtx); return c.Len() == 0 }
		},
		"SelectContext": func() func() bool {
			c := full()
			return func() bool { SelectContext(nilCtx, RecvCase(c, nil)); return c.Len() == 0 }
		},
		"Semaphore.Acquire": func() func() bool {
			sem := NewSemaphore(1)
			return func() bool { sem.Acquire(nilCtx, 1); return !sem.TryAcquire(1) }
		},
		"SleepContext": func() func() bool {
			return func() bool { SleepContext(nilCtx, 0); return true }
		},
	}
	check := func(where string) {
		for name, prepare := range calls {
			call := prepare()
			worked := false
			msg := mustPanic(t, func() { worked = call() })
			if !strings.Contains(msg, name+" with a nil Context") {
				t.Errorf("%s: %s(nil, ...) panicked with %q", where, name, msg)
			}
			if worked {
				t.Errorf("%s: %s(nil, ...) did its work", where, name)
			}
		}
	}
	check("goroutine")
	s := newSched(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(context.Context) error { check("virtual thread"); return nil })
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
}

// Shutdown and Close called from another scheduler's virtual thread park
// it while they wait: on a one-carrier scheduler, the thread that lets
// the other scheduler drain runs meanwhile. Before, they blocked the
// carrier, and the drain waited for a thread that carrier would never
// run.
func TestShutdownFromAnotherSchedulersThreadParks(t *testing.T) {
	for _, op := range []string{"Shutdown", "Close"} {
		t.Run(op, func(t *testing.T) {
			for _, det := range []bool{false, true} {
				a := boundedSched(t, Options{Carriers: 1, Deterministic: det, Seed: 1})
				b, err := New(Options{Carriers: 1})
				if err != nil {
					t.Fatal(err)
				}
				held := make(chan *VThread, 1)
				// b's thread waits for an Unpark that a's second thread gives.
				if _, err := b.Go(func(ctx context.Context) error {
					held <- Current()
					Park()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				bt := <-held
				waitUntil(t, "b's thread to park", func() bool { return bt.state.Load() == vtParked })
				calling := make(chan struct{})
				closer := goOrFatal(t, a, func(ctx context.Context) error {
					close(calling)
					if op == "Close" {
						return b.Close()
					}
					sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					return b.Shutdown(sctx)
				})
				<-calling // the releaser can run only once the closer frees the carrier
				releaser := goOrFatal(t, a, func(ctx context.Context) error {
					bt.Unpark()
					return nil
				})
				if err := joinWithin(t, releaser); err != nil {
					t.Fatal(err)
				}
				if err := joinWithin(t, closer); err != nil {
					t.Fatalf("deterministic=%v: %s from a's thread: %v", det, op, err)
				}
			}
		})
	}
}

// TestMisuseMessages: misuse that Go catches panics here with a
// message that names it, from a goroutine and from a virtual thread.
func TestMisuseMessages(t *testing.T) {
	s := newSched(t, Options{})
	check := func(where string) {
		for name, f := range map[string]func(){
			"Mutex.Unlock":      func() { var m Mutex; m.Unlock() },
			"RWMutex.Unlock":    func() { var rw RWMutex; rw.Unlock() },
			"RWMutex.RUnlock":   func() { var rw RWMutex; rw.RUnlock() },
			"RWMutex.RUnlock/W": func() { var rw RWMutex; rw.Lock(); rw.RUnlock() },
			"RWMutex.Unlock/R":  func() { var rw RWMutex; rw.RLock(); rw.Unlock() },
			"WaitGroup.Add":     func() { var wg WaitGroup; wg.Add(1); wg.Add(-2) },
			"Cond.Wait/Mutex":   func() { NewCond(&Mutex{}).Wait() },
			"Cond.Wait/RW":      func() { NewCond(&RWMutex{}).Wait() },
			"Cond.Wait/RLocker": func() { var rw RWMutex; NewCond(rw.RLocker()).Wait() },
			"Semaphore.Release": func() { NewSemaphore(2).Release(1) },
			"Chan.Close":        func() { c := NewChan[int](0); c.Close(); c.Close() },
			"Chan.Send":         func() { c := NewChan[int](1); c.Close(); c.Send(1) },
			"Chan.TrySend":      func() { c := NewChan[int](1); c.Close(); c.TrySend(1) },
			"SendCase":          func() { c := NewChan[int](1); c.Close(); TrySelect(SendCase(c, 1)) },
		} {
			msg := mustPanic(t, f)
			if !strings.HasPrefix(msg, "scheduler") {
				t.Errorf("%s: %s: %q", where, name, msg)
			}
		}
	}
	check("goroutine")
	vt, _ := s.Go(func(context.Context) error { check("vthread"); return nil })
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}

// WaitGroup.Go with a nil function panics at the call, as Scheduler.Go
// does, instead of starting a virtual thread that panics.
func TestWaitGroupGoNil(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	var wg WaitGroup
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil function") {
			t.Fatalf("WaitGroup.Go(s, nil) recovered %v, want a nil-function panic", r)
		}
		wg.Wait() // the counter was left as it was
	}()
	wg.Go(s, nil)
}

// TestNilVThreadPanicsClearly: Unpark, Join, Wait, Done and the accessors on a nil *VThread (as
// from Current outside a virtual thread) panic with a message that names
// the method and where nil handles come from, not a nil dereference.
func TestNilVThreadPanicsClearly(t *testing.T) {
	var vt *VThread = Current() // a plain goroutine: nil
	for name, call := range map[string]func(){
		"Unpark":    func() { vt.Unpark() },
		"Join":      func() { _ = vt.Join() },
		"Wait":      func() { _ = vt.Wait(context.Background()) },
		"Done":      func() { <-vt.Done() },
		"ID":        func() { _ = vt.ID() },
		"Name":      func() { _ = vt.Name() },
		"Context":   func() { _ = vt.Context() },
		"Scheduler": func() { _ = vt.Scheduler() },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "VThread."+name+" on a nil *VThread") || !strings.Contains(msg, "Current returns nil") {
					t.Errorf("%s on nil: panicked with %q", name, msg)
				}
			}()
			call()
		}()
	}
	if got := vt.String(); got != "vthread <nil>" {
		t.Errorf("String of a nil *VThread = %q", got)
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
