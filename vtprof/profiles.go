package vtprof

import (
	"fmt"
	"io"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/scheduler"
)

// WritePinProfile writes s's pinning profile to w, the analogue of JFR's
// jdk.VirtualThreadPinned: for each stack and reason at which parks or
// yields could not suspend their virtual thread, how many did and how
// long their carriers were blocked, counting those that lasted at least
// the threshold (Scheduler.SetPinThreshold, 20 ms by default). Debug 0
// writes a gzipped profile.proto whose sample values are the count and
// the nanoseconds, with labels "reason", "site" (the function whose frame
// pinned) and "kind" (park or yield); debug 1 and above the same as text.
func WritePinProfile(w io.Writer, s *scheduler.Scheduler, debug int) error {
	recs := s.PinProfile()
	if debug > 0 {
		var trs []textRecord
		for _, r := range recs {
			trs = append(trs, textRecord{values: []int64{r.Nanos, r.Count}, note: fmt.Sprintf("reason: %s site: %s kind: %s", r.Reason, r.Function, pinKind(r.Park)), stack: r.Stack})
		}
		return writeText(w, fmt.Sprintf("--- pinned:\nthreshold=%v\n# nanoseconds count @ stack", s.PinThreshold()), trs)
	}
	b := newBuilder("pinned", "count", "blocked", "nanoseconds")
	b.p.DefaultSampleType = "blocked"
	for _, r := range recs {
		b.p.Sample = append(b.p.Sample, &profile.Sample{
			Value:    []int64{r.Count, r.Nanos},
			Location: b.frameLocs(r.Stack),
			Label:    map[string][]string{"reason": {r.Reason.String()}, "site": {r.Function}, "kind": {pinKind(r.Park)}},
		})
	}
	return b.p.Write(w)
}

func pinKind(park bool) string {
	if park {
		return "park"
	}
	return "yield"
}

// WriteParkProfile writes s's park profile to w: where its virtual threads
// parked and for how long, with the block profile's semantics and sample
// types (contentions and delay), sampled at the rate that
// Scheduler.SetParkProfileRate set. A park's delay runs from the park to
// the thread's next mount; the third sample value, wakeup, is the part of
// it from the wake-up on: the wake-to-run latency, the time the woken
// thread waited for a carrier. Debug 0 writes a gzipped profile.proto,
// debug 1 and above text.
func WriteParkProfile(w io.Writer, s *scheduler.Scheduler, debug int) error {
	recs := s.ParkProfile()
	if debug > 0 {
		var trs []textRecord
		for _, r := range recs {
			trs = append(trs, textRecord{values: []int64{r.Nanos, r.Count, r.WakeNanos}, stack: r.Stack})
		}
		return writeText(w, fmt.Sprintf("--- parks:\nrate=%d\n# nanoseconds count wake-to-run-nanoseconds @ stack", s.ParkProfileRate()), trs)
	}
	b := newBuilder("contentions", "count", "delay", "nanoseconds", "wakeup", "nanoseconds")
	b.p.DefaultSampleType = "delay"
	for _, r := range recs {
		b.p.Sample = append(b.p.Sample, &profile.Sample{Value: []int64{r.Count, r.Nanos, r.WakeNanos}, Location: b.frameLocs(r.Stack)})
	}
	return b.p.Write(w)
}
