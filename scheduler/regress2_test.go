package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/pinning"
)

// Regression tests for bugs a second review found: each failed before its
// fix. (The fairness ones are in fairness_test.go.)

// recvOnGroupChild starts a child of a new group of s that waits on its
// context in RecvContext, and returns it once it is waiting there.
func recvOnGroupChild(t *testing.T, s *Scheduler) (*Group, *Chan[int]) {
	t.Helper()
	g, _ := s.NewGroup(context.Background())
	ch := NewChan[int](0)
	started := make(chan struct{})
	if err := g.Go(func(ctx context.Context) error {
		close(started)
		_, _, err := ch.RecvContext(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	return g, ch
}

// Close cancels the contexts of a group's children too: a group's context
// derives from the caller's, not the scheduler's, and Close waited for
// ever on a child waiting on it.
func TestCloseCancelsGroupChildren(t *testing.T) {
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := recvOnGroupChild(t, s)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(proofTimeout):
		t.Fatalf("Close hung for %v on a group's child waiting on its context (Live = %d)", proofTimeout, s.Live())
	}
	if err := g.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the group's Wait = %v, want its child's context.Canceled", err)
	}
}

// A Shutdown whose context ends cancels a group's children, which then
// finish, and the carriers exit: they stayed, with the child, for ever.
func TestShutdownCancelsGroupChildren(t *testing.T) {
	base := goroutines.Settled()
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := recvOnGroupChild(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want its context's deadline", err)
	}
	waitUntil(t, "the group's child to end", func() bool { return s.Live() == 0 })
	if err := g.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the group's Wait = %v, want its child's context.Canceled", err)
	}
	waitUntil(t, "the carriers to exit", func() bool { return goroutines.Settled() <= base })
}

// A group whose scheduler is cancelled after its Wait returned is left
// alone, and a group made after the scheduler closed starts cancelled.
func TestGroupAfterWaitAndAfterClose(t *testing.T) {
	s, err := New(Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("the group's own")
	parent, cancelParent := context.WithCancelCause(context.Background())
	g, gctx := s.NewGroup(parent)
	if err := g.Go(func(ctx context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cancelParent(cause)
	// Wait cancelled it with context.Canceled; nothing after changes that.
	if c := context.Cause(gctx); c != context.Canceled {
		t.Errorf("cause of a waited group's context after Close = %v, want context.Canceled", c)
	}
	_, late := s.NewGroup(context.Background())
	if late.Err() == nil {
		t.Error("a group made after Close has a live context")
	}
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
	if !doneWithin(vt, proofTimeout) {
		t.Fatalf("RecvContext did not return within %v of its context's cancellation: the carrier slept through it", proofTimeout)
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

// Shutdown with a context that has already ended reports a drained
// scheduler as drained: the select between the two picked either at
// random, and returned ctx.Err() before the carriers had exited about
// half the time.
func TestShutdownEndedContextDrained(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		s, err := New(Options{Carriers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(ctx); err != nil {
			s.Close()
			t.Fatalf("round %d: Shutdown of a scheduler with nothing live = %v, want nil", i, err)
		}
	}
}

// Wait for itself panics as Join does; it waited until its context ended.
func TestWaitForItselfPanics(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(context.Context) error {
		return Current().Wait(context.Background())
	})
	if !doneWithin(vt, proofTimeout) {
		t.Fatal("a virtual thread waiting for itself hangs")
	}
	var pe *PanicError
	if err := vt.Join(); !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "itself") {
		t.Fatalf("Wait for itself: %v, want a panic that says why", err)
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
