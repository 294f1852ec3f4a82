package scheduler

import "sync/atomic"

// testHooks are the points where tests hold a carrier to force an
// interleaving. Each is nil outside tests, and production code only loads
// them. They are gathered here, the package's one set of test hooks,
// because the code they stop is production code.
var testHooks struct {
	// finish is called at the end of finish: a test holds the carrier
	// there to look at what the joiners it woke see.
	finish atomic.Pointer[func(*VThread)]
	// sleepBeforeIdle and sleepBeforeLook are called by carrier.sleep
	// before it registers the carrier as idle and before it looks at the
	// queues once more.
	sleepBeforeIdle, sleepBeforeLook atomic.Pointer[func(*carrier)]
	// waker is called by the waker goroutine of a scheduler when it has
	// taken a kick, before it looks at the global queue (outside.go).
	waker atomic.Pointer[func(*Scheduler)]
}
