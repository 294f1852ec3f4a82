package scheduler

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/weftrt/weft/internal/goroutines"
)

func TestGroupFirstErrorCancelsOthers(t *testing.T) {
	s := newTest(t, Options{})
	g, ctx := s.NewGroup(context.Background())
	boom := errors.New("boom")
	var cancelled atomic.Int32
	for i := range 10 {
		g.Go(func(ctx context.Context) error {
			if i == 3 {
				return boom
			}
			for ctx.Err() == nil {
				Sleep(100_000) // 100 µs
			}
			cancelled.Add(1)
			return ctx.Err()
		})
	}
	if err := g.Wait(); err != boom {
		t.Fatalf("Wait = %v, want %v", err, boom)
	}
	if cancelled.Load() != 9 {
		t.Fatalf("%d children saw the cancellation, want 9", cancelled.Load())
	}
	if context.Cause(ctx) != boom {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}

func TestGroupPanic(t *testing.T) {
	s := newTest(t, Options{})
	g, _ := s.NewGroup(context.Background())
	g.Go(func(ctx context.Context) error { panic("child panic") })
	g.Go(func(ctx context.Context) error { <-ctx.Done(); return nil })
	var pe *PanicError
	if err := g.Wait(); !errors.As(err, &pe) || pe.Value != "child panic" {
		t.Fatalf("Wait = %v", err)
	}
}

func TestGroupFromVThreadAllSucceed(t *testing.T) {
	s := newTest(t, Options{})
	var sum atomic.Int64
	vt, _ := s.Go(func(ctx context.Context) error {
		g, _ := s.NewGroup(ctx)
		for i := range 100 {
			g.Go(func(ctx context.Context) error {
				if i%10 == 0 { // a child starting grandchildren in the same group
					g.Go(func(ctx context.Context) error { sum.Add(1000); return nil })
				}
				sum.Add(int64(i))
				return nil
			})
		}
		return g.Wait()
	})
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if got, want := sum.Load(), int64(4950+10*1000); got != want {
		t.Fatalf("sum %d, want %d", got, want)
	}
}

// A zero Group, which errgroup.Group's users may expect to work, panics
// with a message that says to use NewGroup: it was a nil pointer
// dereference deep in the scheduler (Go) or a call of a nil function
// (Wait).
func TestZeroGroupPanicsClearly(t *testing.T) {
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

// A long-lived group (a Go per connection, Wait at shutdown) must not hold
// every child it ever ran until Wait, and their results: it holds its
// live children and at most about as many finished ones.
func TestGroupDropsFinishedChildren(t *testing.T) {
	s := newTest(t, Options{})
	g, _ := s.NewGroup(context.Background())
	const n = 2000
	ptrs := make(chan weak.Pointer[VThread], n)
	for range n {
		if err := g.Go(func(ctx context.Context) error {
			ptrs <- weak.Make(Current())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Let it finish before the next starts, as in a server whose
		// connections come and go.
		for s.Live() != 0 {
			runtime.Gosched()
		}
	}
	var wps []weak.Pointer[VThread]
	for range n {
		wps = append(wps, <-ptrs)
	}
	runtime.GC()
	runtime.GC()
	alive := 0
	for _, p := range wps {
		if p.Value() != nil {
			alive++
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if alive > 64 {
		t.Fatalf("%d of %d finished children are still reachable before Wait (the group holds them)", alive, n)
	}
	t.Logf("%d of %d finished children reachable before Wait", alive, n)
}

// Children that come and go while others stay live: Wait still waits for
// every one started, including those started by children and those Go
// started while the array was being compacted.
func TestGroupWaitAfterCompaction(t *testing.T) {
	s := newTest(t, Options{})
	g, _ := s.NewGroup(context.Background())
	release := NewChan[struct{}](0)
	var done [300]bool
	for i := range done {
		long := i%3 == 0
		if err := g.Go(func(ctx context.Context) error {
			if long {
				release.Recv() // parks until the channel is closed
			}
			if i%7 == 0 {
				return g.Go(func(ctx context.Context) error { done[i] = true; return nil })
			}
			done[i] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		release.Close()
	}()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, d := range done {
		if !d {
			t.Fatalf("child %d had not finished when Wait returned", i)
		}
	}
}

// A child that panics after another child failed is not dropped: Wait
// joins its *PanicError to the first error.
func TestGroupLaterPanicReported(t *testing.T) {
	s := newTest(t, Options{})
	g, _ := s.NewGroup(context.Background())
	boom := errors.New("first")
	g.Go(func(ctx context.Context) error { return boom })
	g.Go(func(ctx context.Context) error {
		<-ctx.Done()
		panic("second, after the cancellation")
	})
	err := g.Wait()
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "second, after the cancellation" {
		t.Fatalf("Wait = %v; want the child's panic reachable with errors.As", err)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Wait = %v; want the first error reachable with errors.Is", err)
	}
	if cause := context.Cause(g.ctx); cause != boom {
		t.Errorf("the group's context was cancelled with %v, want the first error", cause)
	}
}

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
	case <-time.After(waitTimeout):
		t.Fatalf("Close hung for %v on a group's child waiting on its context (Live = %d)", waitTimeout, s.Live())
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
