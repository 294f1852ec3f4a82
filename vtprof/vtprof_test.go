package vtprof

import (
	"context"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/scheduler"
)

// parkDepth is how many parkDeep frames a parked test thread has.
const parkDepth = 7

// parkDeep parks the calling virtual thread n+1 parkDeep frames deep.
//
//go:noinline
func parkDeep(n int) {
	if n == 0 {
		scheduler.Park()
		return
	}
	parkDeep(n - 1)
}

// parked starts n virtual threads on a tracking scheduler, named "worker-i"
// with the label "worker"="i", half of them in a Group, each parked
// parkDepth frames deep, and waits until every one has parked. Its cleanup
// unparks them and closes the scheduler.
func parked(t testing.TB, n int) (*scheduler.Scheduler, []*scheduler.VThread) {
	t.Helper()
	s, err := scheduler.New(scheduler.Options{Carriers: 2, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := s.NewGroup(context.Background())
	var vts []*scheduler.VThread
	started := make(chan *scheduler.VThread, n)
	for i := range n {
		body := func(context.Context) error {
			parkDeep(parkDepth - 1)
			return nil
		}
		pprof.Do(context.Background(), pprof.Labels("worker", strconv.Itoa(i)), func(context.Context) {
			if i%2 == 1 && n <= 100 {
				if err := g.Go(func(ctx context.Context) error { started <- scheduler.Current(); return body(ctx) }); err != nil {
					t.Fatal(err)
				}
				return
			}
			vt, err := s.GoNamed("worker-"+strconv.Itoa(i), body)
			if err != nil {
				t.Fatal(err)
			}
			vts = append(vts, vt)
		})
	}
	for len(vts) < n {
		vts = append(vts, <-started)
	}
	t.Cleanup(func() {
		for _, vt := range vts {
			vt.Unpark()
		}
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
		s.Close()
	})
	for {
		st := 0
		for info := range s.Threads() {
			if info.State == scheduler.Parked && len(info.Stack) > 0 {
				st++
			}
		}
		if st == n {
			return s, vts
		}
		time.Sleep(time.Millisecond)
	}
}

// countFunc returns how many of frames' functions end in suffix.
func countFunc(names []string, suffix string) int {
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, suffix) {
			n++
		}
	}
	return n
}

// sampleFuncs returns the function names of a sample's stack, innermost
// first.
func sampleFuncs(smp *profile.Sample) []string {
	var out []string
	for _, l := range smp.Location {
		for _, ln := range l.Line {
			out = append(out, ln.Function.Name)
		}
	}
	return out
}
