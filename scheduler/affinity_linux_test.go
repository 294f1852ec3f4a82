//go:build linux

package scheduler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs the calling thread may run on.
func allowedCPUs(t *testing.T) (unix.CPUSet, []int) {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatalf("SchedGetaffinity: %v", err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return set, cpus
}

// threadsBoundOtherwise returns the threads of this process whose CPU
// affinity is not want.
func threadsBoundOtherwise(t *testing.T, want unix.CPUSet) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatalf("listing threads: %v", err)
	}
	var bad []string
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread has exited
		}
		if set != want {
			bad = append(bad, fmt.Sprintf("thread %d: %d CPUs", tid, set.Count()))
		}
	}
	return bad
}

// TestCPUAffinity: with CPUs and locked carriers, a virtual thread
// runs on a thread bound to its carrier's CPU, before and after parking;
// and once the scheduler has shut down, no thread of the process is left
// bound to it (a carrier's thread goes back to the runtime's pool when
// the carrier exits, unless it is ended).
func TestCPUAffinity(t *testing.T) {
	orig, cpus := allowedCPUs(t)
	cpu := cpus[0] // CPU 0 where the process may use it
	lock := true
	s, err := New(Options{Carriers: 1, MaxCompensation: -1, CPUs: []int{cpu}, LockOSThread: &lock})
	if err != nil {
		t.Fatalf("New(CPUs: [%d]): %v", cpu, err)
	}
	check := func() error {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return err
		}
		if set.Count() != 1 || !set.IsSet(cpu) {
			return fmt.Errorf("the carrier's thread may run on %d CPUs, want only CPU %d", set.Count(), cpu)
		}
		return nil
	}
	for range 10 {
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			if err := check(); err != nil {
				return err
			}
			Yield()
			Sleep(time.Millisecond)
			return check()
		})
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	shutdownWithin(t, s, 10*time.Second)
	if len(cpus) < 2 {
		t.Logf("the process may run on CPU %d only: cannot tell a bound thread from the others", cpu)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		bad := threadsBoundOtherwise(t, orig)
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Shutdown, threads are still bound otherwise than the process (%d CPUs): %v", orig.Count(), bad)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCPUAffinityMany: several carriers bound to the process's CPUs
// in turn (stack-copying backend: the portable one cannot move a virtual
// thread between locked carriers); every virtual thread runs on a thread
// bound to exactly one of them.
func TestCPUAffinityMany(t *testing.T) {
	if isPortable() {
		t.Skip("portable backend: continuations cannot move between locked carriers")
	}
	_, cpus := allowedCPUs(t)
	lock := true
	s, err := New(Options{Carriers: 2 * len(cpus), CPUs: cpus, LockOSThread: &lock})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownWithin(t, s, 10*time.Second)
	for i, c := range s.carriers {
		if want := cpus[i%len(cpus)]; c.cpu != want {
			t.Fatalf("carrier %d bound to CPU %d, want %d", i, c.cpu, want)
		}
	}
	var vts []*VThread
	for range 100 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
			for range 3 {
				var set unix.CPUSet
				if err := unix.SchedGetaffinity(0, &set); err != nil {
					return err
				}
				if set.Count() != 1 {
					return fmt.Errorf("a carrier's thread may run on %d CPUs, want 1", set.Count())
				}
				Yield()
			}
			return nil
		}))
	}
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCPUAffinityCompensation: a compensation carrier, started while
// the one carrier is blocked by a thread parked pinned, runs on the
// scheduler's CPUs only (Options.CPUs), not on all of the process's; and
// the mutated Options.CPUs slice of the caller does not reach it.
func TestCPUAffinityCompensation(t *testing.T) {
	if isPortable() {
		t.Skip("portable backend: carriers locked to their threads (which CPUs needs) allow no compensation carrier")
	}
	_, cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skipf("needs a process that may run on 2 CPUs or more, to tell the scheduler's CPU from the rest (this one may use %v)", cpus)
	}
	cpu := cpus[0]
	lock := true
	opts := Options{Carriers: 1, MaxCompensation: 1, CPUs: []int{cpu}, LockOSThread: &lock}
	s := boundedSched(t, opts)
	opts.CPUs[0] = cpus[1] // the scheduler's CPUs are those New was given
	pinned := goOrFatal(t, s, func(ctx context.Context) error {
		pinning.Do(Park) // blocks the carrier: a compensation carrier starts
		return nil
	})
	other := goOrFatal(t, s, func(ctx context.Context) error {
		defer pinned.Unpark()
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return err
		}
		if set.Count() != 1 || !set.IsSet(cpu) {
			return fmt.Errorf("a compensation carrier's thread may run on %d CPUs, want only CPU %d", set.Count(), cpu)
		}
		return nil
	})
	if err := joinWithin(t, other); err != nil {
		t.Error(err)
	}
	if err := joinWithin(t, pinned); err != nil {
		t.Error(err)
	}
}

// New refuses CPUs the process may not run on, naming the CPU, and says
// when a CPU is beyond what an affinity mask here can name.
func TestNewRefusesCPUs(t *testing.T) {
	set, _ := allowedCPUs(t)
	lock := true
	absent := -1
	for c := range 1024 {
		if !set.IsSet(c) {
			absent = c
			break
		}
	}
	cases := []struct {
		cpu  int
		want string
	}{
		{-1, "CPU -1 is not available to this process"},
		{1 << 20, "CPU 1048576 is beyond the 1024 CPUs that affinity can name here"},
	}
	if absent >= 0 {
		cases = append(cases, struct {
			cpu  int
			want string
		}{absent, fmt.Sprintf("CPU %d is not available to this process", absent)})
	}
	for _, tc := range cases {
		s, err := New(Options{Carriers: 1, MaxCompensation: -1, CPUs: []int{tc.cpu}, LockOSThread: &lock})
		if err == nil {
			shutdownWithin(t, s, 10*time.Second)
			t.Errorf("New(CPUs: [%d]) succeeded", tc.cpu)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(CPUs: [%d]): %v, want an error containing %q", tc.cpu, err, tc.want)
		}
	}
}
