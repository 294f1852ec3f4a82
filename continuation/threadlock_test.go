package continuation_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// TestBodyEndsWithThreadLockChanged: a body that calls
// runtime.LockOSThread (or undoes a lock of its caller's) and then ends,
// by returning, panicking or runtime.Goexit, without undoing it leaves the
// goroutine that called Run with the changed lock count, as the same code
// would in a plain call, on both backends. On the stack-copying backend the
// body runs on that goroutine. On the portable one it runs on a coroutine
// goroutine, whose end must not switch back to Run's caller with the
// thread locking other than at the coroutine's creation: the runtime's
// coroswitch turns that into an unrecoverable fatal error ("coro: OS
// thread locking must match locking at coroutine creation"), which the
// default onPinned handler's panic after a LockOSThread in a body, or a
// t.FailNow in a body holding a lock, would cause.
func TestBodyEndsWithThreadLockChanged(t *testing.T) {
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
		{name: "panics", delta: 1, yieldFirst: true, end: func(*scope.Scope) { panic("locked body") },
			panics: func(r any) bool { return r == "locked body" }},
		{name: "goexit", delta: 1, yieldFirst: true, end: func(*scope.Scope) { runtime.Goexit() }, goexits: true},
		{name: "unlocks the caller", callerLocks: 1, delta: -1, end: func(*scope.Scope) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := scope.New("threadlock")
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
