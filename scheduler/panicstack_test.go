package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/scope"
)

// yieldThenPanic is a virtual thread's function (outside package
// scheduler, whose frames the engine's thaw policy counts as its own)
// that yields parks times, then panics in a function of its own.
func yieldThenPanic(parks int) func(context.Context) error {
	return func(ctx context.Context) error {
		for range parks {
			scheduler.Yield()
		}
		panicsInVThread(parks)
		return nil
	}
}

//go:noinline
func panicsInVThread(v int) { panic(v) }

// PanicError.Stack names the function that panicked however many times
// the thread parked first. From its second park on, the body's frame,
// with the deferred call that records the panic, is frozen under the
// return barrier: the panic is raised again there, and the stack at that
// point no longer has the function's frames (the engine keeps them:
// weft.Cont.PanicStack).
func TestPanicStackAfterParks(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for parks := range 4 {
		vt := start(t, s, yieldThenPanic(parks))
		var pe *scheduler.PanicError
		if err := vt.Join(); !errors.As(err, &pe) || pe.Value != parks {
			t.Fatalf("after %d parks Join = %v, want the panic with %d", parks, err, parks)
		}
		if !bytes.Contains(pe.Stack, []byte("scheduler_test.panicsInVThread(")) {
			t.Errorf("after %d parks PanicError.Stack does not name the function that panicked:\n%s", parks, pe.Stack)
		}
		if cap(pe.Stack) > 2*len(pe.Stack) {
			t.Errorf("after %d parks PanicError.Stack keeps %d bytes for a %d-byte trace", parks, cap(pe.Stack), len(pe.Stack))
		}
	}
}

// A virtual thread that has yielded more than once from its own function
// ends with vthreadBody's frame frozen under the return barrier (the thaw
// policy leaves it there: TestParkLoopLeavesBodyFrozen; and
// TestPanicStackAfterParks fails if the panic does not cross the barrier
// from the second park on). The function's return, panic or Goexit
// crosses the barrier, and the body's deferred call, thawed by it, must
// still record how the thread ended. The functions are this package's,
// not package scheduler's, whose frames the thaw policy counts as the
// engine's and never leaves frozen on their own.
func TestBodyEndsAfterParks(t *testing.T) {
	var handled atomic.Int32
	s, err := scheduler.New(scheduler.Options{Carriers: 1, OnPanic: func(*scheduler.VThread, any) { handled.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mine := errors.New("mine")
	for parks := range 4 {
		var deferred atomic.Int32
		ends := []struct {
			name string
			end  func() error
			ok   func(error) bool
		}{
			{"return", func() error { return mine }, func(err error) bool { return err == mine }},
			{"panic", func() error { panic(parks) }, func(err error) bool {
				var pe *scheduler.PanicError
				return errors.As(err, &pe) && pe.Value == parks
			}},
			{"Goexit", func() error { runtime.Goexit(); return nil }, func(err error) bool { return errors.Is(err, scheduler.ErrGoexit) }},
		}
		for _, e := range ends {
			before := handled.Load()
			vt := start(t, s, func(ctx context.Context) error {
				defer deferred.Add(1)
				for range parks {
					scheduler.Yield()
				}
				return e.end()
			})
			// Join may run it on this goroutine: a Goexit would end the test.
			if err := vt.Wait(context.Background()); !e.ok(err) {
				t.Errorf("%s after %d yields: Wait = %v", e.name, parks, err)
			}
			want := int32(0)
			if e.name == "panic" {
				want = 1
			}
			if got := handled.Load() - before; got != want {
				t.Errorf("%s after %d yields: OnPanic called %d times, want %d", e.name, parks, got, want)
			}
		}
		if n := deferred.Load(); n != int32(len(ends)) {
			t.Errorf("after %d yields the functions' deferred calls ran %d times, want %d", parks, n, len(ends))
		}
	}
}

// nestedDefer, in a continuation of its own inside a virtual thread,
// has a deferred call pending while it is frozen under that
// continuation's barrier, three yields deep, when the panic comes.
//
//go:noinline
func nestedDefer(us *scope.Scope) {
	defer func() {}()
	nestedMid(us)
}

//go:noinline
func nestedMid(us *scope.Scope) { nestedLoop(us) }

//go:noinline
func nestedLoop(us *scope.Scope) {
	for range 3 {
		continuation.Yield(us)
	}
	panicsNested()
}

//go:noinline
func panicsNested() { panic("nested") }

// A panic raised again at a nested continuation's barrier, which then
// ends that continuation and crosses the virtual thread's own barrier
// (its body frozen after three parks), is raised again there too: the
// stack the thread's PanicError keeps is still the one where the panic
// began, which the nested continuation hands to the thread's.
func TestPanicStackNested(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vt := start(t, s, func(ctx context.Context) error {
		for range 3 {
			scheduler.Yield()
		}
		us := scope.New("nested")
		c := continuation.New(us, func() { nestedDefer(us) })
		for !c.IsDone() {
			c.Run()
		}
		return nil
	})
	var pe *scheduler.PanicError
	if err := vt.Join(); !errors.As(err, &pe) || pe.Value != "nested" {
		t.Fatalf("Join = %v, want the nested continuation's panic", err)
	}
	if !bytes.Contains(pe.Stack, []byte("scheduler_test.panicsNested(")) {
		t.Errorf("PanicError.Stack does not name the function that panicked:\n%s", pe.Stack)
	}
}
