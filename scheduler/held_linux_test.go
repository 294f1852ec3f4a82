package scheduler

import (
	"runtime"
	"testing"
)

// TestThreadSched: a locked goroutine's thread reports the time it ran,
// which grows as it computes.
func TestThreadSched(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := threadID()
	run0, _, ok := threadSched(tid)
	if !ok {
		t.Skip("the kernel has no schedstat") // CONFIG_SCHED_INFO off: the check is skipped in held.go too
	}
	for {
		run, _, ok := threadSched(tid)
		if !ok {
			t.Fatal("schedstat went away")
		}
		if run > run0 {
			return
		}
	}
}
