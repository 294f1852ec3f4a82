package weft

import (
	"runtime"
	"testing"

	"github.com/weftrt/weft/scope"
)

// TestAbandonUnwinds checks that Abandon runs the deferred calls of a
// suspended continuation's frames, with no owner, ends it, and counts no
// Run for the unwinding, on either backend.
func TestAbandonUnwinds(t *testing.T) {
	s := scope.New("abandon")
	deferred := make(chan struct{})
	after := false
	var c *Cont
	var ownerWhileUnwinding any = "unset"
	c = NewCont(s, func() {
		defer close(deferred)
		defer func() { ownerWhileUnwinding = c.Owner() }()
		Yield(s)
		after = true // never reached: the yield unwinds
	})
	c.Run("runner")
	if c.IsDone() {
		t.Fatal("the body ended before its yield")
	}
	c.Abandon()
	<-deferred // the body's deferred call ran
	// IsDone is true from the start of the unwinding: wait for its end,
	// so that no goroutine of this test outlives it.
	for state(c.state.Load()) != stDone {
		runtime.Gosched()
	}
	if ownerWhileUnwinding != nil {
		t.Errorf("Owner while Abandon unwinds = %v, want nil", ownerWhileUnwinding)
	}
	if after {
		t.Error("the body went on after its abandoned yield")
	}
	if st := c.Stats(); st.Runs != 1 || st.Yields != 1 {
		t.Errorf("Stats after Abandon: %d runs, %d yields; want 1 and 1", st.Runs, st.Yields)
	}
	c.Abandon() // not suspended: does nothing
}
