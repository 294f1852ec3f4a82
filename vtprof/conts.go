package vtprof

import (
	"fmt"
	"io"
	"iter"
	"runtime"
	"strings"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/continuation"
)

// WriteContinuations writes a dump of continuations that a program keeps
// suspended itself (a generator pool, an actor system), which no scheduler
// lists: conts yields each with a name. Debug 0 writes a gzipped
// profile.proto with one sample per distinct stack and state, the state as
// the label "state"; debug 1 the same as text; debug 2 and above one block
// per continuation. A continuation's state is "suspended", with its stack
// (Continuation.StackTrace), "done", or "not suspended" (new, running, or
// suspended inside an enclosing continuation, whose stack has its
// frames).
func WriteContinuations(w io.Writer, conts iter.Seq2[string, *continuation.Continuation], debug int) error {
	type entry struct {
		name, state string
		stack       []runtime.Frame
	}
	var groups []*threadGroup
	byKey := make(map[string]*threadGroup)
	var entries []entry
	total := 0
	for name, c := range conts {
		total++
		e := entry{name: name}
		switch frames := c.StackTrace(); {
		case frames != nil:
			e.state, e.stack = "suspended", frames
		case c.IsDone():
			e.state = "done"
		default:
			e.state = "not suspended"
		}
		entries = append(entries, e)
		var k strings.Builder
		k.WriteString(e.state)
		for _, f := range e.stack {
			fmt.Fprintf(&k, " %x", f.PC)
		}
		g := byKey[k.String()]
		if g == nil {
			g = &threadGroup{state: e.state, stack: e.stack}
			byKey[k.String()] = g
			groups = append(groups, g)
		}
		g.n++
	}
	switch {
	case debug <= 0:
		b := newBuilder("continuations", "count")
		for _, g := range groups {
			locs := b.frameLocs(g.stack)
			if len(locs) == 0 {
				locs = append(locs, b.synthetic("continuation ("+g.state+")"))
			}
			b.p.Sample = append(b.p.Sample, &profile.Sample{Value: []int64{g.n}, Location: locs, Label: map[string][]string{"state": {g.state}}})
		}
		return b.p.Write(w)
	case debug == 1:
		var recs []textRecord
		for _, g := range groups {
			recs = append(recs, textRecord{values: []int64{g.n}, note: "state: " + g.state, stack: g.stack})
		}
		return writeText(w, fmt.Sprintf("continuation profile: total %d", total), recs)
	}
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "continuation %q [%s]:\n", e.name, e.state)
		for _, f := range e.stack {
			fmt.Fprintf(&b, "%s(...)\n\t%s:%d +%#x\n", f.Function, f.File, f.Line, f.PC-f.Entry)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
