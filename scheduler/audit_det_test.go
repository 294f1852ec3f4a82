package scheduler

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A deterministic AfterFunc armed with a due duration by the last virtual
// thread to end during a draining Shutdown: the thread that ends lets the
// scheduler drain, and the timer then fired at the carrier's next look and
// started f's thread after Shutdown had seen the scheduler drained. When f
// parked (a Sleep), the carrier saw the scheduler drained and exited:
// Shutdown returned nil with a virtual thread still live, parked for good
// (Live 1, f never finished). A timer not yet fired when the last thread
// ends is dropped, as api.md says of a pending one.
func TestAuditDetDueAfterFuncAtDrain(t *testing.T) {
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
func TestAuditDetGroupCancelledWithScheduler(t *testing.T) {
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
func TestAuditDetGroupCancelledAfterDrain(t *testing.T) {
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

// A zero Group, which errgroup.Group's users may expect to work, panics
// with a message that says to use NewGroup: it was a nil pointer
// dereference deep in the scheduler (Go) or a call of a nil function
// (Wait).
func TestAuditZeroGroupPanicsClearly(t *testing.T) {
	for name, use := range map[string]func(g *Group){
		"Go":   func(g *Group) { g.Go(func(context.Context) error { return nil }) },
		"Wait": func(g *Group) { g.Wait() },
	} {
		msg := func() (msg string) {
			defer func() { msg, _ = recover().(string) }()
			use(new(Group))
			return "no panic"
		}()
		if !strings.Contains(msg, "NewGroup") {
			t.Errorf("Group.%s on a zero Group: panic %q, want one that says to use NewGroup", name, msg)
		}
	}
}
