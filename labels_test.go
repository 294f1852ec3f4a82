package weft

import (
	"context"
	"fmt"
	"runtime/pprof"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/scope"
)

// The engine's side of a continuation's profiler labels
// (labels_stackcopy_amd64.go; package continuation's labels_test.go tests
// what a user sees, on both backends).

// goLabels returns the calling goroutine's profiler labels.
//
//go:linkname goLabels runtime/pprof.runtime_getProfLabel
func goLabels() unsafe.Pointer

// withLabels gives the calling goroutine the labels kv (none if empty)
// and returns them.
func withLabels(kv ...string) unsafe.Pointer {
	ctx := context.Background()
	if len(kv) > 0 {
		ctx = pprof.WithLabels(ctx, pprof.Labels(kv...))
	}
	pprof.SetGoroutineLabels(ctx)
	return goLabels()
}

// TestLeaveLabels: a record that leaves labels to its executor runs its
// body under the labels of the goroutine that calls Run, at every resume.
// The body leaves the labels it sets there, at a yield and at its end.
// LeaveLabels marks such a record, and every NewUncountedCont record is
// one. The scheduler's carriers rely on it: they swap a virtual thread's
// labels themselves. On the portable backend the body runs on a goroutine
// of its own, and the engine hands the labels across each switch.
func TestLeaveLabels(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	for _, kind := range []string{"LeaveLabels", "uncounted"} {
		t.Run(kind, func(t *testing.T) {
			s := scope.New(t.Name())
			var seen [3]unsafe.Pointer // the body's labels as it starts and resumes
			var set [2]unsafe.Pointer  // those it sets before a yield, and before its end
			body := func() {
				seen[0] = goLabels()
				set[0] = withLabels("req", "body")
				Yield(s)
				seen[1] = goLabels()
				Yield(s)
				seen[2] = goLabels()
				set[1] = withLabels("req", "body's end")
			}
			var c *Cont
			if kind == "LeaveLabels" {
				c = NewCont(s, body)
				c.LeaveLabels()
			} else {
				c = NewUncountedCont(s, body)
			}
			runner := withLabels("who", "runner")
			c.Run(nil)
			if seen[0] != runner {
				t.Errorf("the body started with %p, want the runner's %p", seen[0], runner)
			}
			if got := goLabels(); got != set[0] {
				t.Errorf("after the yield the runner has %p, want the body's %p: the executor's to restore", got, set[0])
			}
			pprof.SetGoroutineLabels(context.Background())
			c.Run(nil)
			if seen[1] != nil {
				t.Errorf("the body resumed with %p, want the runner's (none)", seen[1])
			}
			// Another goroutine, with labels of its own, resumes it to its end.
			own := withLabels("who", "first goroutine")
			var third, after unsafe.Pointer
			done := make(chan struct{})
			go func() {
				defer close(done)
				third = withLabels("who", "second goroutine")
				c.Run(nil)
				after = goLabels()
			}()
			<-done
			if !c.IsDone() {
				t.Fatal("the body did not end")
			}
			if seen[2] != third {
				t.Errorf("resumed by another goroutine, the body has %p, want that goroutine's %p", seen[2], third)
			}
			if after != set[1] {
				t.Errorf("after the body's end its runner has %p, want those the body set last %p", after, set[1])
			}
			if got := goLabels(); got != own {
				t.Errorf("a goroutine that did not run the body has %p, want its own %p", got, own)
			}
			if c.counted { // an uncounted record has no room for labels
				if cc := (*countedCont)(unsafe.Pointer(c)); cc.labels != nil {
					t.Errorf("a record that leaves labels recorded the body's: %p", cc.labels)
				}
			}
		})
	}
}

// TestLabelsAcrossReset: a record's body starts with the labels of the
// goroutine that made the record, or reset it for that body. The labels
// of the goroutine that runs it first do not count. The record ends with
// its body's labels dropped, and the runner has its own back. LeaveLabels
// holds across Reset, and a record so marked keeps no labels.
func TestLabelsAcrossReset(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	s := scope.New(t.Name())
	var seen []unsafe.Pointer
	body := func() {
		seen = append(seen, goLabels())
		withLabels("req", fmt.Sprint("body ", len(seen)))
		Yield(s)
	}
	var c *Cont
	for round := range 3 {
		maker := withLabels("who", fmt.Sprint("maker ", round))
		if round == 0 {
			c = NewCont(s, body)
		} else {
			c.Reset(s, body)
		}
		runner := withLabels("who", fmt.Sprint("runner ", round))
		c.Run(nil)
		c.Run(nil)
		if !c.IsDone() {
			t.Fatalf("round %d: the body did not end", round)
		}
		if got := goLabels(); got != runner {
			t.Errorf("round %d: the runner has %p after the body's end, want its own %p", round, got, runner)
		}
		if cc := (*countedCont)(unsafe.Pointer(c)); cc.labels != nil || cc.outer != nil {
			t.Errorf("round %d: the ended record keeps labels %p, outer %p", round, cc.labels, cc.outer)
		}
		if seen[round] != maker {
			t.Errorf("round %d: the body started with labels %p, want its maker's %p (not the runner's %p)", round, seen[round], maker, runner)
		}
	}
	cc := (*countedCont)(unsafe.Pointer(c))
	withLabels("who", "maker of a record that leaves labels")
	c.Reset(s, body)
	c.LeaveLabels()
	if cc.labels != nil {
		t.Errorf("LeaveLabels left the record labels %p", cc.labels)
	}
	c.Run(nil)
	c.Run(nil)
	c.Reset(s, body)
	if !cc.leaveLabels || cc.labels != nil {
		t.Errorf("after Reset: leaveLabels %v, labels %p; want true, nil", cc.leaveLabels, cc.labels)
	}
}

// TestLabelsNotRetained: a suspended record keeps the labels of the
// goroutine that last ran it (countedCont.outer) only while they are its
// body's too. A record that leaves labels, or whose body has others,
// holds nothing of the goroutine's once Run has returned. That holds
// whether the body yielded to its own scope or to an enclosing one.
func TestLabelsNotRetained(t *testing.T) {
	if !useStackCopy {
		t.Skip("labels are swapped only on the stack-copying backend")
	}
	defer pprof.SetGoroutineLabels(context.Background())
	check := func(what string, c *Cont) {
		t.Helper()
		cc := (*countedCont)(unsafe.Pointer(c))
		if cc.outer != nil && cc.outer != cc.labels {
			t.Errorf("%s: the suspended record keeps the runner's labels %p (its body's are %p)", what, cc.outer, cc.labels)
		}
	}
	for _, leave := range []bool{false, true} {
		s := scope.New(t.Name())
		c := NewCont(s, func() {
			withLabels("req", "body")
			Yield(s)
			Yield(s)
		})
		if leave {
			c.LeaveLabels()
		}
		withLabels("who", "runner")
		c.Run(nil)
		check("after a yield", c)
		withLabels("who", "runner 2")
		c.Run(nil)
		check("after a second yield", c)
		c.Run(nil)
		if cc := (*countedCont)(unsafe.Pointer(c)); cc.outer != nil || cc.labels != nil {
			t.Errorf("ended record keeps labels %p, %p", cc.outer, cc.labels)
		}
	}
	so, si := scope.New("outer"), scope.New("inner")
	var inner *Cont
	outer := NewCont(so, func() {
		withLabels("req", "outer")
		inner = NewCont(si, func() {
			withLabels("req", "inner")
			Yield(so)
		})
		inner.Run(nil)
	})
	withLabels("who", "runner")
	outer.Run(nil)
	check("outer after a yield from inside", outer)
	check("inner after a yield to the outer scope", inner)
	outer.Run(nil)
}
