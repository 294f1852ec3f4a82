package continuation_test

import (
	"fmt"
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

// runThenDrop runs body to its first yield in a continuation of scope s,
// drops the continuation, and waits for its deferred calls to have closed
// done (the engine unwinds a dropped continuation once the collector finds
// its handle unreachable).
func runThenDrop(t *testing.T, s *scope.Scope, done chan struct{}, body func()) {
	t.Helper()
	func() {
		c := continuation.New(s, body)
		c.Run()
		if c.IsDone() {
			t.Fatal("the body did not yield")
		}
	}()
	if !gcPollUntil(leakPatience, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}) {
		t.Fatal("the dropped continuation was not unwound")
	}
}

// TestCurrentDuringAbandonment: the deferred calls of a dropped
// continuation run on an internal goroutine after its handle has been
// collected, with the continuation still mounted there. Current of its
// scope has no handle to return, and returns nil without panicking (a
// panic there would end the process: nothing on that internal goroutine
// can recover it).
func TestCurrentDuringAbandonment(t *testing.T) {
	s := scope.New("abandon-current")
	log := &abandonLog{}
	done := make(chan struct{})
	runThenDrop(t, s, done, func() {
		defer close(done)
		defer func() {
			defer func() {
				if r := recover(); r != nil {
					log.note(fmt.Sprintf("Current panicked: %v", r))
				}
			}()
			log.note(fmt.Sprintf("Current(s) == nil: %v", continuation.Current(s) == nil))
		}()
		continuation.Yield(s)
	})
	if got, want := fmt.Sprint(log.get()), "[Current(s) == nil: true]"; got != want {
		t.Fatalf("deferred call during abandonment logged %s, want %s", got, want)
	}
}

// TestYieldToAbandonedFromNested: a deferred call of a dropped
// continuation c, unwinding, runs a nested continuation d whose body
// yields to c's scope. Nobody can resume c, so the yield unwinds d (its
// deferred calls run) and c goes on unwinding, as a yield from c's own
// deferred calls does (docs/limitations.md), on both backends. The
// stack-copying backend cannot freeze c's region (the deferred call runs
// under runtime.Goexit, a runtime frame), and must not take the yield for
// a pinned one: c's onPinned handler has no handle to call.
func TestYieldToAbandonedFromNested(t *testing.T) {
	s, si := scope.New("abandon-outer"), scope.New("abandon-inner")
	log := &abandonLog{}
	done := make(chan struct{})
	runThenDrop(t, s, done, func() {
		defer close(done)
		defer log.note("c: outer deferred call")
		defer func() {
			d := continuation.New(si, func() {
				defer log.note("d: deferred call")
				log.note("d: yields to c")
				continuation.Yield(s)
				log.note("d: resumed")
			})
			d.Run()
			log.note("c: d.Run returned")
		}()
		continuation.Yield(s)
	})
	want := "[d: yields to c d: deferred call c: outer deferred call]"
	if got := fmt.Sprint(log.get()); got != want {
		t.Fatalf("log %s, want %s", got, want)
	}
}
