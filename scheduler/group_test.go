package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
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
