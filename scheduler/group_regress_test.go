package scheduler

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
	"weak"
)

// A long-lived group (a Go per connection, Wait at shutdown) must not hold
// every child it ever ran: it used to keep them all until Wait, 137 B or
// more each, and their results. Now it holds its live children and at
// most about as many finished ones.
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
