package tracer

import (
	"fmt"
	"io"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/trace/internal/target"
)

// WriteProfile writes samples as a pprof profile: the pins, pinned parks
// and long freezes, each with the stack where it happened, counted and
// timed, with labels "event" and "reason". b symbolizes the stacks.
func WriteProfile(w io.Writer, b *target.Binary, samples []Sample, dur time.Duration) error {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "events", Unit: "count"},
			{Type: "duration", Unit: "nanoseconds"},
		},
		DefaultSampleType: "events",
		TimeNanos:         time.Now().UnixNano(),
		DurationNanos:     int64(dur),
		Mapping: []*profile.Mapping{{
			ID: 1, File: b.Path, HasFunctions: true, HasFilenames: true, HasLineNumbers: true,
		}},
	}
	m := p.Mapping[0]
	m.Start, m.Limit = b.TextRange()
	locs := make(map[uint64]*profile.Location)
	funcs := make(map[string]*profile.Function)
	loc := func(pc uint64, ret bool) *profile.Location {
		if l, ok := locs[pc]; ok {
			return l
		}
		q := pc
		if ret {
			q-- // the call, not the instruction after it
		}
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m, Address: pc}
		if fr := b.Symbolize(q); fr.Function != "" {
			f := funcs[fr.Function]
			if f == nil {
				f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: fr.Function, SystemName: fr.Function, Filename: fr.File}
				funcs[fr.Function] = f
				p.Function = append(p.Function, f)
			}
			l.Line = []profile.Line{{Function: f, Line: int64(fr.Line)}}
		}
		locs[pc] = l
		p.Location = append(p.Location, l)
		return l
	}
	for _, s := range samples {
		ps := &profile.Sample{
			Value: []int64{1, int64(s.Duration)},
			Label: map[string][]string{"event": {s.Event}},
		}
		if s.Reason != "" {
			ps.Label["reason"] = []string{s.Reason}
		}
		for i, pc := range s.Stack {
			ps.Location = append(ps.Location, loc(pc, i > 0))
		}
		p.Sample = append(p.Sample, ps)
	}
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("building the profile: %w", err)
	}
	return p.Write(w)
}
