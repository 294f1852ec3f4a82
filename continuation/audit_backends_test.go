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

