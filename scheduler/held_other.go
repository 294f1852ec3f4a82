//go:build !linux

package scheduler

// threadID returns 0: no thread's run queue wait is known here.
func threadID() int { return 0 }

// threadSched reports that the thread's times are unknown.
func threadSched(tid int) (run, wait int64, ok bool) { return 0, 0, false }
