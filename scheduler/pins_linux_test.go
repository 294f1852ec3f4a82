//go:build linux

package scheduler

import (
	"context"
	"fmt"
	"testing"
)

// New checks Options.CPUs against the CPUs the process may run on. It
// read the calling thread's affinity: called from a virtual thread whose
// carrier is bound to one CPU (or from any goroutine on a thread bound so),
// it refused every other CPU, saying the process could not use it.
func TestPinNewCPUsFromBoundCarrier(t *testing.T) {
	_, cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skip("the process may run on one CPU only")
	}
	lock := true
	s1 := boundedSched(t, Options{Carriers: 1, MaxCompensation: -1, CPUs: []int{cpus[0]}, LockOSThread: &lock})
	var s2 *Scheduler
	vt := goOrFatal(t, s1, func(ctx context.Context) error {
		var err error
		s2, err = New(Options{Carriers: 1, MaxCompensation: -1, CPUs: []int{cpus[1]}, LockOSThread: &lock})
		if err != nil {
			return fmt.Errorf("New(CPUs: [%d]) from a virtual thread on a carrier bound to CPU %d: %w", cpus[1], cpus[0], err)
		}
		return nil
	})
	err := joinWithin(t, vt)
	if s2 != nil {
		s2.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
