package weft

import (
	"context"
	"runtime/pprof"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/scope"
)

// TestReviewLabelsNotRetained: a suspended record keeps the labels of the
// goroutine that last ran it (countedCont.outer) only while they are its
// body's too: a record that leaves labels, or whose body has others, holds
// nothing of the goroutine's once Run has returned, whether the body
// yielded to its own scope or to an enclosing one.
func TestReviewLabelsNotRetained(t *testing.T) {
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
