package vtprof

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/scheduler"
)

// WriteThreads writes a dump of s's virtual threads to w in the format
// debug selects, as the goroutine profile does: 0 is a gzipped
// profile.proto with one sample per distinct stack, state and labels (the
// state is the label "state"); 1 is the same in text, aggregated; 2 and
// above print one goroutine-style block per virtual thread, with its ID,
// name, state, carrier, how long it has been parked, labels, group, stack
// and the call that started it.
//
// Only a scheduler that tracks its threads (scheduler.Options.TrackThreads)
// can list them: for one that does not, the dump gives the live count.
func WriteThreads(w io.Writer, s *scheduler.Scheduler, debug int) error {
	threads := slices.Collect(s.Threads())
	switch {
	case debug <= 0:
		return threadsProto(w, s, threads)
	case debug == 1:
		return threadsText(w, s, threads)
	default:
		return threadsBlocks(w, s, threads)
	}
}

// untracked says why a dump lists no thread.
func untracked(s *scheduler.Scheduler) string {
	return fmt.Sprintf("%d virtual threads live; the scheduler does not track them (scheduler.Options.TrackThreads)", s.Live())
}

// labelString formats labels as runtime/pprof's debug=1 output does.
func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q:%q", k, l[k])
	}
	b.WriteByte('}')
	return b.String()
}

// threadGroup is the threads that share a stack, a state and labels.
type threadGroup struct {
	n      int64
	state  string
	labels map[string]string
	stack  []runtime.Frame
}

// groupThreads groups threads by stack, state and labels, in the order
// their first thread came.
func groupThreads(threads []scheduler.ThreadInfo) []*threadGroup {
	byKey := make(map[string]*threadGroup)
	var out []*threadGroup
	for _, t := range threads {
		var k strings.Builder
		k.WriteString(t.State.String())
		k.WriteString(labelString(t.Labels))
		for _, f := range t.Stack {
			if f.PC != 0 {
				fmt.Fprintf(&k, " %x", f.PC)
			} else { // a running thread's frame, from a traceback
				fmt.Fprintf(&k, " %s:%s:%d", f.Function, f.File, f.Line)
			}
		}
		g := byKey[k.String()]
		if g == nil {
			g = &threadGroup{state: t.State.String(), labels: t.Labels, stack: t.Stack}
			byKey[k.String()] = g
			out = append(out, g)
		}
		g.n++
	}
	return out
}

func threadsProto(w io.Writer, s *scheduler.Scheduler, threads []scheduler.ThreadInfo) error {
	b := newBuilder("vthreads", "count")
	if !s.Tracking() {
		b.p.Comments = append(b.p.Comments, untracked(s))
		b.p.Sample = append(b.p.Sample, &profile.Sample{
			Value:    []int64{int64(s.Live())},
			Location: []*profile.Location{b.synthetic("vthreads (untracked)")},
			Label:    map[string][]string{"state": {"untracked"}},
		})
		return b.p.Write(w)
	}
	for _, g := range groupThreads(threads) {
		smp := &profile.Sample{Value: []int64{g.n}, Label: map[string][]string{"state": {g.state}}}
		for k, v := range g.labels {
			smp.Label[k] = []string{v}
		}
		smp.Location = b.frameLocs(g.stack)
		if len(smp.Location) == 0 {
			smp.Location = []*profile.Location{b.synthetic("vthread (" + g.state + ")")}
		}
		b.p.Sample = append(b.p.Sample, smp)
	}
	return b.p.Write(w)
}

func threadsText(w io.Writer, s *scheduler.Scheduler, threads []scheduler.ThreadInfo) error {
	if !s.Tracking() {
		_, err := fmt.Fprintf(w, "vthread profile: total %d\n# %s\n", s.Live(), untracked(s))
		return err
	}
	var recs []textRecord
	for _, g := range groupThreads(threads) {
		recs = append(recs, textRecord{values: []int64{g.n}, labels: labelString(g.labels), note: "state: " + g.state, stack: g.stack})
	}
	return writeText(w, fmt.Sprintf("vthread profile: total %d", len(threads)), recs)
}

// groupIDs numbers the groups of threads in the order they first appear,
// from 1.
func groupIDs(threads []scheduler.ThreadInfo) map[*scheduler.Group]int {
	ids := make(map[*scheduler.Group]int)
	for _, t := range threads {
		if t.Group != nil && ids[t.Group] == 0 {
			ids[t.Group] = len(ids) + 1
		}
	}
	return ids
}

func threadsBlocks(w io.Writer, s *scheduler.Scheduler, threads []scheduler.ThreadInfo) error {
	var b strings.Builder
	if !s.Tracking() {
		fmt.Fprintf(&b, "# %s\n", untracked(s))
	}
	now := time.Now()
	groups := groupIDs(threads)
	for _, t := range threads {
		fmt.Fprintf(&b, "vthread %d", t.ID)
		if t.Name != "" {
			fmt.Fprintf(&b, " %q", t.Name)
		}
		fmt.Fprintf(&b, " [%s", t.State)
		if !t.ParkedSince.IsZero() {
			if d := now.Sub(t.ParkedSince); d >= time.Minute {
				fmt.Fprintf(&b, ", %d minutes", int(d/time.Minute))
			} else {
				fmt.Fprintf(&b, ", %s", d.Round(time.Millisecond))
			}
		}
		if t.Carrier >= 0 {
			fmt.Fprintf(&b, ", carrier %d", t.Carrier)
		}
		b.WriteString("]:\n")
		if l := labelString(t.Labels); l != "" {
			fmt.Fprintf(&b, "labels: %s\n", l)
		}
		if t.Group != nil {
			fmt.Fprintf(&b, "group: %d\n", groups[t.Group])
		}
		if len(t.Stack) == 0 {
			fmt.Fprintf(&b, "(%s: no stack to read)\n", t.State)
		}
		for _, f := range t.Stack {
			if f.PC == 0 { // a running thread's frame, from a traceback
				fmt.Fprintf(&b, "%s(...)\n\t%s:%d\n", f.Function, f.File, f.Line)
				continue
			}
			fmt.Fprintf(&b, "%s(...)\n\t%s:%d +%#x\n", f.Function, f.File, f.Line, f.PC-f.Entry)
		}
		if created := stackFrames(t.CreatedBy); len(created) > 0 {
			f := created[0]
			fmt.Fprintf(&b, "created by %s\n\t%s:%d +%#x\n", f.Function, f.File, f.Line, f.PC-f.Entry)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
