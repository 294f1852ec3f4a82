package continuation_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// abandonLog records the order in which the deferred calls of abandoned
// bodies run.
type abandonLog struct {
	mu    sync.Mutex
	order []string
}

func (l *abandonLog) note(s string) { l.mu.Lock(); l.order = append(l.order, s); l.mu.Unlock() }

func (l *abandonLog) get() []string { l.mu.Lock(); defer l.mu.Unlock(); return slices.Clone(l.order) }

// abandonOuterBody and abandonInnerBody are the marker functions by which
// the leak check recognises this test's goroutines.
func abandonOuterBody(t *testing.T, log *abandonLog, outer, inner *scope.Scope) {
	defer func() {
		log.note("outer defer")
		continuation.Yield(outer)
		t.Error("outer deferred call resumed after yielding while abandoned")
	}()
	d := continuation.New(inner, func() { abandonInnerBody(t, log, outer, inner) })
	d.Run()
	t.Error("abandoned outer body resumed")
}

func abandonInnerBody(t *testing.T, log *abandonLog, outer, inner *scope.Scope) {
	defer func() {
		log.note("inner defer")
		continuation.Yield(inner)
		t.Error("inner deferred call resumed after yielding while abandoned")
	}()
	continuation.Yield(outer)
	t.Error("abandoned inner body resumed")
}

// An abandoned continuation whose deferred calls try to yield while it
// unwinds, nested inside another abandoned continuation: both bodies must
// unwind completely (inner first), no deferred call may resume past its
// yield, and no goroutine may remain.
func TestAbandonedDeferredCallsThatYield(t *testing.T) {
	base := leakStart("continuation_test.abandon")
	log := &abandonLog{}
	func() {
		outer, inner := scope.New("outer"), scope.New("inner")
		c := continuation.New(outer, func() { abandonOuterBody(t, log, outer, inner) })
		c.Run()
	}()
	want := []string{"inner defer", "outer defer"}
	base.wait(t, "abandoned nested continuations", func() string {
		if got := log.get(); !slices.Equal(got, want) {
			return "deferred calls ran as " + strings.Join(got, ", ")
		}
		return ""
	})
}
