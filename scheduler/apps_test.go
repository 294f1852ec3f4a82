package scheduler_test

// Application-level tests: context trees and errgroup-style pipelines as a
// user would write them, cancelled while their virtual threads are parked
// in every kind of wait, with collections forced meanwhile, on one carrier,
// several, and in deterministic mode.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/scheduler"
)

type appsMode struct {
	name string
	opts scheduler.Options
}

var appsModes = []appsMode{
	{"carriers=1", scheduler.Options{Carriers: 1}},
	{"carriers=3", scheduler.Options{Carriers: 3}},
	{"det/seed=1", scheduler.Options{Deterministic: true, Seed: 1}},
	{"det/seed=7", scheduler.Options{Deterministic: true, Seed: 7}},
}

// appsSched starts a scheduler, and checks when the test ends that it
// shuts down and leaves no goroutine behind.
func appsSched(t *testing.T, opts scheduler.Options) *scheduler.Scheduler {
	t.Helper()
	base := goroutines.Settled()
	s, err := scheduler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v (%d live)", err, s.Live())
			return
		}
		for i := 0; goroutines.Settled() > base && i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if g := goroutines.Settled(); g > base {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutine leak: %d, %d before\n%s", g, base, buf[:runtime.Stack(buf, true)])
		}
	})
	return s
}

// inVT runs fn in a virtual thread of s and returns its error.
func inVT(t *testing.T, s *scheduler.Scheduler, fn func(ctx context.Context) error) error {
	t.Helper()
	vt, err := s.Go(fn)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- vt.Join() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("hangs: %d live\n%s", s.Live(), buf[:runtime.Stack(buf, true)])
		return nil
	}
}

var errBoom = errors.New("boom")

// TestAppsGroupCancelsEveryWait builds a context tree (a group, a nested
// group under one of its children, a context.WithTimeout under another)
// whose threads are parked in every kind of wait that watches a context
// (Chan.RecvContext, SelectContext, Semaphore.Acquire, SleepContext,
// VThread.Wait) and in waits that do not (Mutex.Lock, Cond.Wait,
// WaitGroup.Wait, Chan.Recv), which a watcher thread ends when the
// context does, as a user must. One child then fails: every other thread
// must end with the context's error, none must hang, and the group's Wait
// must return the failure.
func TestAppsGroupCancelsEveryWait(t *testing.T) {
	for _, m := range appsModes {
		t.Run(m.name, func(t *testing.T) {
			s := appsSched(t, m.opts)
			err := inVT(t, s, func(context.Context) error {
				return groupCancelsEveryWait(s)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func groupCancelsEveryWait(s *scheduler.Scheduler) error {
	g, ctx := s.NewGroup(context.Background())
	var parked atomic.Int32 // children about to wait
	results := make([]error, 0, 16)
	var resMu scheduler.Mutex
	child := func(name string, fn func(ctx context.Context) error) {
		g.Go(func(ctx context.Context) error {
			parked.Add(1)
			err := fn(ctx)
			resMu.Lock()
			results = append(results, fmt.Errorf("%s: %w", name, err))
			resMu.Unlock()
			if errors.Is(err, context.Canceled) {
				return nil // the group's failure is errBoom's
			}
			return fmt.Errorf("%s: %w", name, err)
		})
	}

	empty := scheduler.NewChan[int](0)
	full := scheduler.NewChan[int](1)
	full.Send(1)
	child("RecvContext", func(ctx context.Context) error {
		_, _, err := empty.RecvContext(ctx)
		return err
	})
	child("SendContext", func(ctx context.Context) error {
		return full.SendContext(ctx, 2)
	})
	child("SelectContext", func(ctx context.Context) error {
		var v int
		_, _, err := scheduler.SelectContext(ctx, scheduler.RecvCase(empty, &v), scheduler.SendCase(full, 3))
		return err
	})
	sem := scheduler.NewSemaphore(0)
	child("Acquire", func(ctx context.Context) error { return sem.Acquire(ctx, 1) })
	child("SleepContext", func(ctx context.Context) error { return scheduler.SleepContext(ctx, time.Hour) })
	blocker := scheduler.NewChan[struct{}](0)
	waitee, err := s.Go(func(context.Context) error {
		blocker.Recv()
		return nil
	})
	if err != nil {
		return err
	}
	child("VThread.Wait", func(ctx context.Context) error { return waitee.Wait(ctx) })

	// Waits that do not watch a context: a watcher ends them.
	var mu scheduler.Mutex
	mu.Lock() // held until the context ends
	var cmu scheduler.Mutex
	cond := scheduler.NewCond(&cmu)
	cancelled := false
	var wg scheduler.WaitGroup
	wg.Add(1)
	plain := scheduler.NewChan[int](0)
	child("watcher", func(ctx context.Context) error {
		_, _, err := scheduler.NewChan[int](0).RecvContext(ctx)
		mu.Unlock()
		cmu.Lock()
		cancelled = true
		cond.Broadcast()
		cmu.Unlock()
		wg.Done()
		plain.Close()
		return err
	})
	child("Mutex.Lock", func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return ctx.Err()
	})
	child("Cond.Wait", func(ctx context.Context) error {
		cmu.Lock()
		for !cancelled {
			cond.Wait()
		}
		cmu.Unlock()
		return ctx.Err()
	})
	child("WaitGroup.Wait", func(ctx context.Context) error {
		wg.Wait()
		return ctx.Err()
	})
	child("Recv", func(ctx context.Context) error {
		if _, ok := plain.Recv(); ok {
			return errors.New("received from a channel nobody sends on")
		}
		return ctx.Err()
	})

	// A nested group under a child, and a WithTimeout under another.
	child("nested group", func(ctx context.Context) error {
		ng, nctx := s.NewGroup(ctx)
		for range 3 {
			ng.Go(func(ctx context.Context) error {
				_, _, err := scheduler.NewChan[int](0).RecvContext(ctx)
				return err
			})
		}
		err := ng.Wait()
		if nctx.Err() == nil {
			return errors.New("the nested group's context outlived Wait")
		}
		return err
	})
	child("WithTimeout", func(ctx context.Context) error {
		tctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		return scheduler.SleepContext(tctx, 2*time.Hour)
	})

	// A thread that collects garbage while the others are parked.
	child("gc", func(ctx context.Context) error {
		for range 3 {
			runtime.GC()
			scheduler.Yield()
		}
		_, _, err := scheduler.NewChan[int](0).RecvContext(ctx)
		return err
	})

	const children = 14
	for parked.Load() < children {
		scheduler.Sleep(time.Millisecond)
	}
	scheduler.Sleep(5 * time.Millisecond) // let them reach their waits
	runtime.GC()
	g.Go(func(context.Context) error { return errBoom })

	err = g.Wait()
	blocker.Close()
	if !errors.Is(err, errBoom) {
		return fmt.Errorf("group Wait: %v, want %v", err, errBoom)
	}
	if ctx.Err() == nil {
		return errors.New("the group's context is not cancelled")
	}
	if len(results) != children {
		return fmt.Errorf("%d results, want %d: %v", len(results), children, results)
	}
	for _, r := range results {
		if !errors.Is(r, context.Canceled) {
			return fmt.Errorf("want context.Canceled: %v", r)
		}
	}
	return waitee.Join()
}

// TestAppsPipeline runs an errgroup-style pipeline: a producer, a fan-out
// to workers over an unbuffered Chan, a fan-in over a buffered one, and a
// consumer, all in one group. Run to the end, it must deliver every item
// once; with a worker failing midway, every stage must stop (the producer
// parked in SendContext, workers in Recv or SendContext) and Wait must
// return the failure. In deterministic mode the same seed must give the
// same order of results.
func TestAppsPipeline(t *testing.T) {
	for _, m := range appsModes {
		t.Run(m.name, func(t *testing.T) {
			for _, failAt := range []int{-1, 300} {
				var orders [2][]int
				for run := range 2 {
					// A scheduler per run: the same seed from the start.
					s := appsSched(t, m.opts)
					err := inVT(t, s, func(context.Context) error {
						order, err := pipeline(s, 1000, 4, failAt)
						orders[run] = order
						if failAt < 0 {
							if err != nil {
								return err
							}
							got := slices.Sorted(slices.Values(order))
							for i, v := range got {
								if v != i*i {
									return fmt.Errorf("result %d is %d, want %d", i, v, i*i)
								}
							}
							if len(got) != 1000 {
								return fmt.Errorf("%d results", len(got))
							}
							return nil
						}
						if !errors.Is(err, errBoom) {
							return fmt.Errorf("Wait: %v, want %v", err, errBoom)
						}
						return nil
					})
					if err != nil {
						t.Fatalf("failAt %d run %d: %v", failAt, run, err)
					}
					if live := s.Live(); live != 0 {
						t.Errorf("%d virtual threads live after the pipeline", live)
					}
				}
				if m.opts.Deterministic && !slices.Equal(orders[0], orders[1]) {
					t.Errorf("failAt %d: the same seed gave two orders:\n%v\n%v", failAt, orders[0], orders[1])
				}
			}
		})
	}
}

func pipeline(s *scheduler.Scheduler, n, workers, failAt int) ([]int, error) {
	g, _ := s.NewGroup(context.Background())
	in := scheduler.NewChan[int](0)
	out := scheduler.NewChan[int](8)
	g.Go(func(ctx context.Context) error {
		defer in.Close()
		for i := range n {
			if err := in.SendContext(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	var wg scheduler.WaitGroup
	for w := range workers {
		wg.Add(1)
		g.Go(func(ctx context.Context) error {
			defer wg.Done()
			for {
				v, ok, err := in.RecvContext(ctx)
				if err != nil || !ok {
					return err
				}
				if v == failAt {
					return errBoom
				}
				if v%(50+w) == 0 {
					runtime.GC()
				}
				if err := out.SendContext(ctx, v*v); err != nil {
					return err
				}
			}
		})
	}
	g.Go(func(ctx context.Context) error {
		wg.Wait()
		out.Close()
		return nil
	})
	var order []int
	g.Go(func(ctx context.Context) error {
		for {
			v, ok, err := out.RecvContext(ctx)
			if err != nil || !ok {
				return err
			}
			order = append(order, v)
		}
	})
	err := g.Wait()
	return order, err
}
