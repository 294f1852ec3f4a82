package continuation_test

// Scenarios run the same way on both backends, where an audit found them
// to differ or to fail on one of them. Each test states the behaviour the
// docs promise (docs/api.md) and holds on both backends.

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
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

// TestAuditBodyEndsWithThreadLockChanged: a body that calls
// runtime.LockOSThread (or undoes a lock of its caller's) and then ends,
// by returning, panicking or runtime.Goexit, without undoing it leaves the
// goroutine that called Run with the changed lock count, as the same code
// would in a plain call. On the stack-copying backend the body runs on
// that goroutine; on the portable one it ran on a coroutine goroutine, and
// its end switched back to Run's caller with the thread locking other than
// at the coroutine's creation, which the runtime's coroswitch turns into an
// unrecoverable fatal error ("coro: OS thread locking must match locking
// at coroutine creation"): the default onPinned handler's panic after a
// LockOSThread in a body, or a t.FailNow in a body holding a lock, ended
// the process.
func TestAuditBodyEndsWithThreadLockChanged(t *testing.T) {
	if _, ok := rt.LockCount(); !ok {
		t.Skip("the thread's lock count cannot be read on this runtime")
	}
	lockCount := func() uint32 { n, _ := rt.LockCount(); return n }
	cases := []struct {
		name string
		// callerLocks: LockOSThread calls of Run's caller before Run;
		// delta: the count the body leaves, relative to its caller's.
		callerLocks int
		delta       int
		yieldFirst  bool
		end         func(s *scope.Scope) // how the body ends, locked
		panics      func(any) bool       // the panic Run propagates, or nil
		goexits     bool
	}{
		{name: "returns", delta: 1, end: func(*scope.Scope) {}},
		{name: "returns after a yield", delta: 1, yieldFirst: true, end: func(*scope.Scope) {}},
		{name: "returns twice locked", delta: 2, end: func(*scope.Scope) { runtime.LockOSThread() }},
		{name: "pinned yield panics", delta: 1, end: func(s *scope.Scope) { continuation.Yield(s) },
			panics: func(r any) bool { err, _ := r.(error); return errors.Is(err, pinning.ErrPinned) }},
		{name: "panics", delta: 1, yieldFirst: true, end: func(*scope.Scope) { panic("audit") },
			panics: func(r any) bool { return r == "audit" }},
		{name: "goexit", delta: 1, yieldFirst: true, end: func(*scope.Scope) { runtime.Goexit() }, goexits: true},
		{name: "unlocks the caller", callerLocks: 1, delta: -1, end: func(*scope.Scope) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := scope.New("audit-lock")
			c := continuation.New(s, func() {
				if tc.yieldFirst {
					continuation.Yield(s)
				}
				if tc.delta > 0 {
					runtime.LockOSThread()
				} else {
					runtime.UnlockOSThread()
				}
				tc.end(s)
			})
			var problems []string
			done := make(chan struct{})
			go func() { // its thread may be left locked: it ends with it
				defer close(done)
				for range tc.callerLocks {
					runtime.LockOSThread()
				}
				if tc.yieldFirst {
					c.Run()
				}
				before := lockCount()
				returned := false
				defer func() {
					r := recover()
					switch {
					case returned && (tc.panics != nil || tc.goexits):
						problems = append(problems, "Run returned")
					case tc.panics != nil && !tc.panics(r):
						problems = append(problems, fmt.Sprintf("Run panicked with %v", r))
					case tc.panics == nil && r != nil:
						problems = append(problems, fmt.Sprintf("Run panicked with %v", r))
					}
					if got, want := int(lockCount()), int(before)+tc.delta; got != want {
						problems = append(problems, fmt.Sprintf("Run's caller has a lock count of %d after Run, want %d", got, want))
					}
					if !c.IsDone() {
						problems = append(problems, "not done")
					}
				}()
				c.Run()
				returned = true
			}()
			<-done
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// auditPanicDeep recurses d frames, each with a deferred call pending,
// yields to s, and then panics in auditPanicLeaf: on the stack-copying
// backend the resume thaws only the innermost frames, so the panic
// reaches frames still frozen with deferred calls pending, and the return
// barrier raises it again there (docs/design.md).
//
//go:noinline
func auditPanicDeep(s *scope.Scope, d int) {
	if d == 0 {
		continuation.Yield(s)
		auditPanicLeaf()
	}
	defer func() { _ = d }()
	auditPanicDeep(s, d-1)
}

//go:noinline
func auditPanicLeaf() { panic(errors.New("audit: deep panic")) }

// TestAuditPanicStackFromRunCaller: the goroutine (or body) that called
// Run and recovers a panic that ended the body learns where it began,
// from its own stack or, where that lacks the frames, from PanicStack
// (docs/api.md: "nil where the deferred call's own stack already shows
// them"; ExampleContinuation_PanicStack is the pattern). On the
// stack-copying backend a panic raised again at the return barrier
// reaches Run's caller without the frames where it began, and PanicStack
// returned nil there: the body's record of them was dropped when it
// ended. The portable backend answered.
func TestAuditPanicStackFromRunCaller(t *testing.T) {
	const site = "continuation_test.auditPanicLeaf("
	// where reports whether the deferred call that recovered r from c's
	// Run can tell where r began.
	where := func(c *continuation.Continuation, r any) (string, bool) {
		if st := c.PanicStack(r); st != nil {
			return "PanicStack", strings.Contains(string(st), site)
		}
		return "debug.Stack", strings.Contains(string(debug.Stack()), site)
	}
	t.Run("goroutine", func(t *testing.T) {
		s := scope.New("audit-panicstack")
		c := continuation.New(s, func() { auditPanicDeep(s, 64) })
		c.Run()
		func() {
			defer func() {
				r := recover()
				if from, ok := where(c, r); !ok {
					t.Errorf("recovered %v; %s does not name %s", r, from, site)
				}
			}()
			c.Run()
		}()
	})
	t.Run("nested", func(t *testing.T) {
		s, si := scope.New("audit-panicstack-outer"), scope.New("audit-panicstack-inner")
		var problem string
		c := continuation.New(s, func() {
			d := continuation.New(si, func() { auditPanicDeep(si, 64) })
			d.Run()
			defer func() {
				r := recover()
				if from, ok := where(d, r); !ok {
					problem = fmt.Sprintf("recovered %v; %s does not name %s", r, from, site)
				}
			}()
			d.Run()
		})
		c.Run()
		if problem != "" {
			t.Error(problem)
		}
	})
}
