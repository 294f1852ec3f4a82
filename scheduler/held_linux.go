//go:build linux

package scheduler

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// threadID returns the calling OS thread's ID.
func threadID() int { return syscall.Gettid() }

// threadSched returns how long the OS thread tid of this process has run
// and waited to run, in nanoseconds (/proc/self/task/tid/schedstat); ok
// is false if the kernel does not say.
func threadSched(tid int) (run, wait int64, ok bool) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	return run, wait, err1 == nil && err2 == nil
}
