package vtprof

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// builder makes a profile.Profile from frames, one Location per PC (the
// frames CallersFrames expands from it, inlined ones included, are its
// Lines) and one Function per name and file.
type builder struct {
	p     *profile.Profile
	locs  map[locKey]*profile.Location
	funcs map[funcKey]*profile.Function
	// nextLoc and nextFunc are the IDs of the next location and function.
	nextLoc, nextFunc uint64
}

type locKey struct {
	pc uintptr
	// For a location with no PC, a synthetic frame's name, or a live
	// frame's function, file and line (a running thread's, read from a
	// traceback).
	name, file string
	line       int
}

type funcKey struct{ name, file string }

// newBuilder returns a builder of a profile with the given sample types,
// each a type and a unit, and a period of one of the first.
func newBuilder(types ...string) *builder {
	p := &profile.Profile{TimeNanos: time.Now().UnixNano()}
	for i := 0; i+1 < len(types); i += 2 {
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: types[i], Unit: types[i+1]})
	}
	p.PeriodType = &profile.ValueType{Type: types[0], Unit: types[1]}
	p.Period = 1
	return extend(p)
}

// extend returns a builder that adds locations and functions to p.
func extend(p *profile.Profile) *builder {
	b := &builder{p: p, locs: make(map[locKey]*profile.Location), funcs: make(map[funcKey]*profile.Function), nextLoc: 1, nextFunc: 1}
	for _, f := range p.Function {
		b.funcs[funcKey{f.Name, f.Filename}] = f
		b.nextFunc = max(b.nextFunc, f.ID+1)
	}
	for _, l := range p.Location {
		b.nextLoc = max(b.nextLoc, l.ID+1)
	}
	return b
}

func (b *builder) function(name, file string, start int64) *profile.Function {
	k := funcKey{name, file}
	f := b.funcs[k]
	if f == nil {
		f = &profile.Function{ID: b.nextFunc, Name: name, SystemName: name, Filename: file, StartLine: start}
		b.nextFunc++
		b.funcs[k] = f
		b.p.Function = append(b.p.Function, f)
	}
	return f
}

// frameLocs returns a location for each frame, innermost first. Frames of
// one PC (a call and the calls inlined into it) share one location.
func (b *builder) frameLocs(frames []runtime.Frame) []*profile.Location {
	var out []*profile.Location
	for i := 0; i < len(frames); {
		j := i + 1
		for j < len(frames) && frames[j].PC == frames[i].PC && frames[i].PC != 0 {
			j++
		}
		k := locKey{pc: frames[i].PC}
		if k.pc == 0 {
			k.name, k.file, k.line = frames[i].Function, frames[i].File, frames[i].Line
		}
		loc := b.locs[k]
		if loc == nil {
			loc = &profile.Location{ID: b.nextLoc, Address: uint64(frames[i].PC)}
			for _, f := range frames[i:j] {
				loc.Line = append(loc.Line, profile.Line{Function: b.function(f.Function, f.File, 0), Line: int64(f.Line)})
			}
			b.nextLoc++
			b.locs[k] = loc
			b.p.Location = append(b.p.Location, loc)
		}
		out = append(out, loc)
		i = j
	}
	return out
}

// pcLocs returns the locations of return PCs, innermost first.
func (b *builder) pcLocs(pcs []uintptr) []*profile.Location {
	var out []*profile.Location
	for _, pc := range pcs {
		loc := b.locs[locKey{pc: pc - 1}]
		if loc == nil {
			out = append(out, b.frameLocs(expand(pc))...)
			continue
		}
		out = append(out, loc)
	}
	return out
}

// expand returns the frames of one return PC, inlined calls first, all
// with the PC less one (the call's, as runtime/pprof gives a location's
// address), so that frameLocs gives them one location.
func expand(pc uintptr) []runtime.Frame {
	var out []runtime.Frame
	frames := runtime.CallersFrames([]uintptr{pc})
	for {
		f, more := frames.Next()
		f.PC = pc - 1
		out = append(out, f)
		if !more {
			return out
		}
	}
}

// synthetic returns the location of a frame that names something (a
// virtual thread, a count) rather than code.
func (b *builder) synthetic(name string) *profile.Location {
	return b.frameLocs([]runtime.Frame{{Function: name}})[0]
}

// stackFrames returns the frames of return PCs, innermost first.
func stackFrames(pcs []uintptr) []runtime.Frame {
	var out []runtime.Frame
	for _, pc := range pcs {
		out = append(out, expand(pc)...)
	}
	return out
}

// writeText writes records in the text format of the runtime's debug=1
// profiles: per record its values, its PCs, its labels if any, and a line
// per frame.
func writeText(w io.Writer, header string, recs []textRecord) error {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].values[0] > recs[j].values[0] })
	var sb strings.Builder
	sb.WriteString(header)
	sb.WriteByte('\n')
	for _, r := range recs {
		for i, v := range r.values {
			if i > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprint(&sb, v)
		}
		sb.WriteString(" @")
		for _, f := range r.stack {
			fmt.Fprintf(&sb, " %#x", f.PC)
		}
		sb.WriteByte('\n')
		if r.labels != "" {
			fmt.Fprintf(&sb, "# labels: %s\n", r.labels)
		}
		if r.note != "" {
			fmt.Fprintf(&sb, "# %s\n", r.note)
		}
		for _, f := range r.stack {
			if f.PC == 0 { // a running thread's frame, from a traceback
				fmt.Fprintf(&sb, "#\t0x0\t%s\t%s:%d\n", f.Function, f.File, f.Line)
				continue
			}
			fmt.Fprintf(&sb, "#\t%#x\t%s+%#x\t%s:%d\n", f.PC, f.Function, f.PC-f.Entry, f.File, f.Line)
		}
		sb.WriteByte('\n')
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// textRecord is one record of a text profile.
type textRecord struct {
	values []int64
	labels string // the record's pprof labels, formatted
	note   string // what else describes the record: its state, its reason
	stack  []runtime.Frame
}
