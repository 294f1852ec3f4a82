//go:build linux

package scheduler

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// checkAffinity checks that every CPU in cpus is one this process may run on.
// It reads the affinity on a new goroutine, which runs on a thread of the
// runtime's pool with the process's affinity. The caller's thread may be
// bound to fewer CPUs: a carrier bound to a CPU, or a goroutine that
// locked and bound its thread. Carriers restore their thread's affinity
// before they unlock it.
func checkAffinity(cpus []int) error {
	var set unix.CPUSet
	errc := make(chan error, 1)
	go func() { errc <- unix.SchedGetaffinity(0, &set) }()
	if err := <-errc; err != nil {
		return fmt.Errorf("scheduler: reading the CPU affinity: %w", err)
	}
	for _, c := range cpus {
		if limit := 8 * int(unsafe.Sizeof(set)); c >= limit {
			return fmt.Errorf("scheduler: CPU %d is beyond the %d CPUs that affinity can name here (golang.org/x/sys/unix.CPUSet)", c, limit)
		}
		if c < 0 || !set.IsSet(c) {
			return fmt.Errorf("scheduler: CPU %d is not available to this process (%d available)", c, set.Count())
		}
	}
	return nil
}

// setAffinity binds the calling thread (locked by the caller) to cpus. It
// returns a function that gives the thread back the affinity it had and
// reports whether it could.
func setAffinity(cpus ...int) (restore func() bool) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return func() bool { return false }
	}
	for _, cpu := range cpus {
		set.Set(cpu)
	}
	_ = unix.SchedSetaffinity(0, &set) // checked by New; best effort after
	return func() bool { return unix.SchedSetaffinity(0, &old) == nil }
}
