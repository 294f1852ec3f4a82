package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Wait for itself panics as Join does; it waited until its context ended.
func TestWaitForItselfPanics(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(context.Context) error {
		return Current().Wait(context.Background())
	})
	if !doneWithin(vt, waitTimeout) {
		t.Fatal("a virtual thread waiting for itself hangs")
	}
	var pe *PanicError
	if err := vt.Join(); !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "itself") {
		t.Fatalf("Wait for itself: %v, want a panic that says why", err)
	}
}

// A virtual thread that joins one of another scheduler is woken onto its
// own scheduler's carriers, not on the carrier of the thread that ended:
// there it would run beside another thread of a one-carrier scheduler
// and be counted out of the wrong scheduler.
func TestJoinAcrossSchedulers(t *testing.T) {
	s1 := newTest(t, Options{Carriers: 1})
	s2 := newTest(t, Options{Carriers: 1})
	for round := range 20 {
		a := goOrFatal(t, s1, func(ctx context.Context) error {
			Sleep(time.Millisecond)
			return nil
		})
		var wrong atomic.Bool
		j := goOrFatal(t, s2, func(ctx context.Context) error {
			if round%2 == 0 {
				a.Join() // the first joiner
			} else {
				a.Wait(ctx) // a waiter on the list
			}
			if c := Current().carrier; c == nil || c.s != s2 {
				wrong.Store(true)
			}
			return nil
		})
		if !doneWithin(j, 5*time.Second) {
			t.Fatal("the joining virtual thread did not finish")
		}
		if wrong.Load() {
			t.Fatalf("round %d: a virtual thread of s2 ran on another scheduler's carrier after joining", round)
		}
		waitUntil(t, "both schedulers empty", func() bool { return s1.Live() == 0 && s2.Live() == 0 })
	}
}

// A Wait whose context ends leaves no waiter behind on the thread it
// waited for: they do not pile up until that thread ends.
func TestWaitTimeoutLeavesNoWaiter(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	var stop atomic.Bool
	long := goOrFatal(t, s, func(ctx context.Context) error {
		for !stop.Load() {
			Park()
		}
		return nil
	})
	poll := goOrFatal(t, s, func(ctx context.Context) error {
		for range 1000 {
			c, cancel := context.WithTimeout(ctx, time.Nanosecond)
			err := long.Wait(c)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("Wait = %v, want a deadline", err)
			}
		}
		return nil
	})
	if err := poll.Join(); err != nil {
		t.Fatal(err)
	}
	long.joinMu.Lock()
	n := 0
	for w := long.rareLocked().joinq; w != nil; w = w.next {
		n++
	}
	long.joinMu.Unlock()
	stop.Store(true)
	long.Unpark()
	if n != 0 {
		t.Errorf("%d waiters left on the thread after 1,000 timed-out Waits", n)
	}
	if err := long.Join(); err != nil {
		t.Fatal(err)
	}
}

// doneWithin reports whether vt ends within d.
func doneWithin(vt *VThread, d time.Duration) bool {
	select {
	case <-vt.Done():
		return true
	case <-time.After(d):
		return false
	}
}

func nop(context.Context) error { return nil }

func TestGoJoin(t *testing.T) {
	s := newTest(t, Options{})
	want := errors.New("boom")
	vt, err := s.Go(func(ctx context.Context) error {
		if Current() == nil {
			return errors.New("Current() is nil inside a virtual thread")
		}
		return want
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := vt.Join(); got != want {
		t.Fatalf("Join = %v, want %v", got, want)
	}
}

// Done and Join from goroutines race with the end of virtual threads that
// do nothing: the channel made on demand is closed exactly once, whichever
// comes first.
func TestDoneRacesEnd(t *testing.T) {
	s := newTest(t, Options{})
	for i := range 20000 {
		vt, err := s.Go(func(ctx context.Context) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			<-vt.Done()
		} else if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
	}
}

// Many parties join one virtual thread at once: virtual threads (the
// first is the joiner slot, the rest queue), Wait with a context, and
// goroutines; each sees its error once it has finished, and joining a
// finished one returns at once.
func TestManyJoiners(t *testing.T) {
	for _, carriers := range []int{1, 2} {
		s := newTest(t, Options{Carriers: carriers})
		want := errors.New("target")
		for round := range 50 {
			release := make(chan struct{})
			target, err := s.Go(func(ctx context.Context) error {
				for {
					select {
					case <-release:
						return want
					default:
						Yield()
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			var got atomic.Int32
			var joiners []*VThread
			for k := range 6 {
				j, err := s.Go(func(ctx context.Context) error {
					var err error
					if k%2 == 0 {
						err = target.Join()
					} else {
						err = target.Wait(ctx)
					}
					if err != want {
						return err
					}
					got.Add(1)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				joiners = append(joiners, j)
			}
			done := make(chan error, 2)
			for range 2 {
				go func() { done <- target.Join() }()
			}
			if round%2 == 0 {
				Sleep(time.Duration(round) * time.Microsecond)
			}
			close(release)
			for range 2 {
				if err := <-done; err != want {
					t.Fatalf("goroutine Join: %v", err)
				}
			}
			for _, j := range joiners {
				if err := j.Join(); err != nil {
					t.Fatalf("joiner: %v", err)
				}
			}
			if got.Load() != 6 {
				t.Fatalf("%d of 6 joiners saw the end", got.Load())
			}
			if err := target.Join(); err != want {
				t.Fatalf("Join after the end: %v", err)
			}
		}
	}
}
