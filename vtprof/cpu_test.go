package vtprof

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/scheduler"
)

// computeDepth is how many computeDeep frames the computing thread has.
const computeDepth = 51

// computeRun is what the computing thread and its test share.
type computeRun struct {
	stop   atomic.Bool  // set by the test: return
	rounds atomic.Int64 // rounds of computing the thread has done
}

// computeDeep calls itself n times, once through computeStep, then
// computes and yields until r.stop is set. Its frames but the innermost
// stay frozen under the return barrier while it computes, from its second
// round on.
//
//go:noinline
func computeDeep(n int, r *computeRun) int {
	if n == 0 {
		x := 0
		for !r.stop.Load() {
			for i := range 2_000_000 {
				x += i * i
			}
			r.rounds.Add(1)
			scheduler.Yield()
		}
		return x
	}
	if n == computeDepth/2 {
		return computeStep(n, r)
	}
	return computeDeep(n-1, r) + 1
}

// computeStep is inlined into computeDeep: a frozen frame holding an
// inlined call, which a whole stack shows as a frame of its own. (One
// only: the CPU profiler keeps 64 frames of a stack, which the portable
// backend's samples hold whole.)
func computeStep(n int, r *computeRun) int { return computeDeep(n-1, r) + 1 }

// TestCPUProfileWholeStacks checks that the samples of a virtual thread
// computing 51 frames deep under a yield loop show its whole stack: every
// computeDeep frame and the computeStep inlined in one of them, the body, and the root naming the thread.
func TestCPUProfileWholeStacks(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var run computeRun
	vt, err := s.GoNamed("compute", func(context.Context) error { computeDeep(computeDepth-1, &run); return nil })
	if err != nil {
		t.Fatal(err)
	}
	// The profile starts after the thread's first mounts, so the labels
	// naming it reach its samples only if each mount gives them to its
	// body (on the portable backend, across the switch to the body's
	// goroutine).
	for run.rounds.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	root := "vthread " + strconv.FormatUint(vt.ID(), 10) + " (compute)"
	in, whole := 0, 0
	// Profiles of half a second until 40 samples fall in the thread's
	// code: how many a profile gets depends on the machine's load.
	for round := 0; round < 40 && in < 40; round++ {
		var buf bytes.Buffer
		if err := CPUProfile(context.Background(), &buf, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(&buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, smp := range p.Sample {
			fns := sampleFuncs(smp)
			if countFunc(fns, ".computeDeep") == 0 {
				continue
			}
			in++
			if countFunc(fns, ".computeDeep") == computeDepth && countFunc(fns, ".computeStep") == 1 && strings.HasSuffix(fns[len(fns)-2], "scheduler.vthreadBody") && fns[len(fns)-1] == root {
				whole++
			} else if in-whole <= 3 {
				t.Logf("a sample without its whole stack: %d computeDeep frames, %d computeStep, %v", countFunc(fns, ".computeDeep"), countFunc(fns, ".computeStep"), fns[max(0, len(fns)-4):])
			}
		}
	}
	run.stop.Store(true)
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d samples in the thread's code have its whole stack", whole, in)
	if in == 0 || whole*100 < in*95 {
		t.Errorf("%d of %d samples in the thread's code have its whole stack, want 95%%", whole, in)
	}
}

// TestStartCPUProfileTwice checks that a second profile is refused while
// one is on.
func TestStartCPUProfileTwice(t *testing.T) {
	var a, b bytes.Buffer
	if err := StartCPUProfile(&a); err != nil {
		t.Fatal(err)
	}
	if err := StartCPUProfile(&b); err != ErrProfiling {
		t.Errorf("second StartCPUProfile: %v, want ErrProfiling", err)
	}
	if err := StopCPUProfile(); err != nil {
		t.Fatal(err)
	}
	if err := StopCPUProfile(); err == nil {
		t.Error("StopCPUProfile without a profile: no error")
	}
	if _, err := profile.Parse(&a); err != nil {
		t.Error(err)
	}
}
