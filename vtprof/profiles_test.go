package vtprof

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scheduler"
)

// pinnedPark parks the calling virtual thread inside pinning.Do, which
// keeps it from being suspended: the park blocks its carrier.
//
//go:noinline
func pinnedPark() {
	pinning.Do(func() { scheduler.Park() })
}

// blockPinned runs park in a virtual thread of a scheduler with a pin
// threshold of 0 and unparks it once it is blocked pinned, and returns
// the scheduler, closed.
func blockPinned(t *testing.T, park func()) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(scheduler.Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPinThreshold(0)
	vt, err := s.Go(func(context.Context) error { park(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, ok := s.Thread(vt.ID())
		if ok && info.State == scheduler.Pinned {
			if !hasFrame(info.Stack, ".blockPinned.func1") {
				t.Errorf("the pinned thread's stack in the dump: %v", info.Stack)
			}
			break
		}
		if !ok {
			t.Fatal("the thread ended without pinning")
		}
		time.Sleep(time.Millisecond)
	}
	vt.Unpark()
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return s
}

func hasFrame(frames []runtime.Frame, suffix string) bool {
	for _, f := range frames {
		if strings.HasSuffix(f.Function, suffix) {
			return true
		}
	}
	return false
}

// checkPinned checks that s's pinning profile has one pinned park for
// reason, at site, with a stack through want.
func checkPinned(t *testing.T, s *scheduler.Scheduler, reason pinning.Reason, site, want string) {
	t.Helper()
	recs := s.PinProfile()
	if len(recs) != 1 {
		t.Fatalf("%d pinning records, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.Reason != reason || !strings.HasSuffix(r.Function, site) || !r.Park || r.Count != 1 || r.Nanos <= 0 {
		t.Errorf("record: reason %v site %s park %v count %d nanos %d; want %v, %s, a park, 1, > 0", r.Reason, r.Function, r.Park, r.Count, r.Nanos, reason, site)
	}
	if !hasFrame(r.Stack, want) || !hasFrame(r.Stack, "scheduler.vthreadBody") || !hasFrame(r.Stack, "scheduler.Park") {
		t.Errorf("stack %v, want one through %s and Park, down to the body", r.Stack, want)
	}
	var buf bytes.Buffer
	if err := WritePinProfile(&buf, s, 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 1 || p.Sample[0].Value[0] != 1 || p.Sample[0].Value[1] != r.Nanos ||
		p.Sample[0].Label["reason"][0] != reason.String() || p.Sample[0].Label["kind"][0] != "park" {
		t.Errorf("profile: %v", p)
	}
	buf.Reset()
	if err := WritePinProfile(&buf, s, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "reason: "+reason.String()) {
		t.Errorf("debug=1:\n%s", buf.String())
	}
}

func TestPinProfileCriticalSection(t *testing.T) {
	s := blockPinned(t, pinnedPark)
	checkPinned(t, s, pinning.CriticalSection, ".pinnedPark", ".pinnedPark")
}

func TestPinThreshold(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.PinThreshold() != scheduler.DefaultPinThreshold {
		t.Errorf("PinThreshold = %v, want the default", s.PinThreshold())
	}
	s.SetPinThreshold(time.Hour) // no test parks that long
	vt, _ := s.Go(func(context.Context) error { pinnedPark(); return nil })
	for s.State().Blocked == 0 {
		time.Sleep(time.Millisecond)
	}
	vt.Unpark()
	vt.Join()
	if recs := s.PinProfile(); len(recs) != 0 {
		t.Errorf("a park shorter than the threshold recorded: %+v", recs)
	}
	if pins := s.Pins(); len(pins) != 1 {
		t.Errorf("Pins = %v, want the one park counted", pins)
	}
}

// waitState waits until the thread with the given ID is in state st.
func waitState(t *testing.T, s *scheduler.Scheduler, id uint64, st scheduler.ThreadState) {
	t.Helper()
	for {
		if info, ok := s.Thread(id); ok && info.State == st && (st != scheduler.Parked || len(info.Stack) > 0) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestParkProfile(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 2, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetParkProfileRate(1) // every park
	const n, parks = 4, 2
	var vts []*scheduler.VThread
	for range n {
		vt, err := s.Go(func(context.Context) error {
			for range parks {
				parkDeep(parkDepth - 1)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		vts = append(vts, vt)
	}
	for range parks {
		for _, vt := range vts {
			waitState(t, s, vt.ID(), scheduler.Parked)
			vt.Unpark()
		}
	}
	for _, vt := range vts {
		vt.Join()
	}
	s.SetParkProfileRate(0)
	recs := s.ParkProfile()
	count := int64(0)
	for _, r := range recs {
		count += r.Count
		deep := 0
		for _, f := range r.Stack {
			if strings.HasSuffix(f.Function, ".parkDeep") {
				deep++
			}
		}
		if deep != parkDepth || r.Nanos <= 0 {
			t.Errorf("record of %d parks, %d ns, %d parkDeep frames (want %d)", r.Count, r.Nanos, deep, parkDepth)
		}
		if r.WakeNanos <= 0 || r.WakeNanos > r.Nanos {
			t.Errorf("record of %d parks, %d ns, %d ns of them after the wake-up", r.Count, r.Nanos, r.WakeNanos)
		}
	}
	if count != n*parks {
		t.Errorf("%d parks recorded, want %d", count, n*parks)
	}
	var buf bytes.Buffer
	if err := WriteParkProfile(&buf, s, 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != len(recs) || p.SampleType[1].Type != "delay" || p.SampleType[2].Type != "wakeup" {
		t.Errorf("profile: %v", p)
	}
}

// TestParkProfileSleep checks that a park that a timer ends (Sleep) is
// recorded with its wake-to-run time.
func TestParkProfileSleep(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetParkProfileRate(1)
	vt, _ := s.Go(func(context.Context) error {
		scheduler.Sleep(time.Millisecond)
		return nil
	})
	vt.Join()
	s.SetParkProfileRate(0)
	recs := s.ParkProfile()
	if len(recs) != 1 || recs[0].Count != 1 || !hasFrame(recs[0].Stack, "scheduler.Sleep") {
		t.Fatalf("records %+v, want one park in Sleep", recs)
	}
	// The timer fired after the park began: the time after it is part of
	// the whole park's. (The park began after the timer was set, so it
	// may be shorter than the sleep.)
	if r := recs[0]; r.WakeNanos <= 0 || r.WakeNanos >= r.Nanos {
		t.Errorf("%d ns parked, %d after the wake-up", r.Nanos, r.WakeNanos)
	}
}
