package continuation_test

// Scenarios run the same way on both backends, where an audit found them
// to differ or to fail on one of them. Each test states the behaviour the
// docs promise (docs/api.md) and holds on both backends.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// auditLog is a log shared by a body unwound on an internal goroutine and
// the test that waits for it.
type auditLog struct {
	mu  sync.Mutex
	log []string
}

func (l *auditLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, fmt.Sprintf(format, args...))
}

func (l *auditLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log...)
}

// auditAbandon runs body to its first yield in a continuation of scope s,
// drops the continuation, and waits for its deferred calls to have closed
// done (the engine unwinds a dropped continuation once the collector finds
// its handle unreachable).
func auditAbandon(t *testing.T, s *scope.Scope, done chan struct{}, body func()) {
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

// TestAuditCurrentDuringAbandonment: the deferred calls of a dropped
// continuation run on an internal goroutine after its handle has been
// collected, with the continuation still mounted there. Current of its
// scope has no handle to return, and returns nil; it used to panic with
// an interface conversion of a nil owner, on both backends, which ended
// the process (nothing on that internal goroutine can recover it).
func TestAuditCurrentDuringAbandonment(t *testing.T) {
	s := scope.New("audit-abandon-current")
	var log auditLog
	done := make(chan struct{})
	auditAbandon(t, s, done, func() {
		defer close(done)
		defer func() {
			defer func() {
				if r := recover(); r != nil {
					log.add("Current panicked: %v", r)
				}
			}()
			log.add("Current(s) == nil: %v", continuation.Current(s) == nil)
		}()
		continuation.Yield(s)
	})
	if got, want := fmt.Sprint(log.get()), "[Current(s) == nil: true]"; got != want {
		t.Fatalf("deferred call during abandonment logged %s, want %s", got, want)
	}
}


// TestAuditYieldToAbandonedFromNested: a deferred call of a dropped
// continuation c, unwinding, runs a nested continuation d whose body
// yields to c's scope. Nobody can resume c, so the yield unwinds d (its
// deferred calls run) and c goes on unwinding, as a yield from c's own
// deferred calls does (docs/limitations.md). The portable backend did
// so; the stack-copying one could not freeze c's region (the deferred
// call runs under runtime.Goexit, a runtime frame), took the yield for a
// pinned one and called c's onPinned handler, whose handle is gone: the
// process ended with an interface conversion panic.
func TestAuditYieldToAbandonedFromNested(t *testing.T) {
	s, si := scope.New("audit-abandon-outer"), scope.New("audit-abandon-inner")
	var log auditLog
	done := make(chan struct{})
	auditAbandon(t, s, done, func() {
		defer close(done)
		defer log.add("c: outer deferred call")
		defer func() {
			d := continuation.New(si, func() {
				defer log.add("d: deferred call")
				log.add("d: yields to c")
				continuation.Yield(s)
				log.add("d: resumed")
			})
			d.Run()
			log.add("c: d.Run returned")
		}()
		continuation.Yield(s)
	})
	want := "[d: yields to c d: deferred call c: outer deferred call]"
	if got := fmt.Sprint(log.get()); got != want {
		t.Fatalf("log %s, want %s", got, want)
	}
}
