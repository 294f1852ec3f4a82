package vtprof

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/scheduler"
)

// spinOuter, spinMiddle and spinInner compute, three calls deep, until
// stop is set; running is set once they are inside.
//
//go:noinline
func spinOuter(running, stop *atomic.Bool) { spinMiddle(running, stop) }

//go:noinline
func spinMiddle(running, stop *atomic.Bool) { spinInner(running, stop) }

//go:noinline
func spinInner(running, stop *atomic.Bool) {
	running.Store(true)
	for !stop.Load() {
		runtime.Gosched()
	}
}

// spinning returns a tracking scheduler with one carrier running one
// thread inside spinInner, stopped and closed at the test's end.
func spinning(t *testing.T) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(scheduler.Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	var running, stop atomic.Bool
	vt, err := s.GoNamed("spin", func(context.Context) error { spinOuter(&running, &stop); return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop.Store(true)
		vt.Join()
		s.Close()
	})
	for !running.Load() {
		time.Sleep(time.Millisecond)
	}
	return s
}

// inOrder reports whether the functions fns appear in names in that
// order, and the last name is vthreadBody.
func inOrder(names []string, fns ...string) bool {
	i := 0
	for _, n := range names {
		if i < len(fns) && strings.Contains(n, fns[i]) {
			i++
		}
	}
	return i == len(fns) && len(names) > 0 && strings.Contains(names[len(names)-1], "scheduler.vthreadBody")
}

var spinChain = []string{".spinInner", ".spinMiddle", ".spinOuter"}

func TestWriteThreadsRunningText(t *testing.T) {
	s := spinning(t)
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 2); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	_, block, ok := strings.Cut(out, "[running, carrier 0]:\n")
	if !ok {
		t.Fatalf("debug=2 has no running thread on carrier 0:\n%s", out)
	}
	block, _, _ = strings.Cut(block, "\n\n")
	var calls []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "created by ") {
			break
		}
		if line != "" && line[0] != '\t' {
			calls = append(calls, line)
		}
	}
	if !inOrder(calls, spinChain...) {
		t.Errorf("debug=2 running thread's calls %q, want spinInner, spinMiddle, spinOuter down to vthreadBody", calls)
	}
}

func TestWriteThreadsRunningAggregated(t *testing.T) {
	s := spinning(t)
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 1); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	_, rec, ok := strings.Cut(out, "# state: running\n")
	if !ok {
		t.Fatalf("debug=1 has no running record:\n%s", out)
	}
	var fns []string
	for _, line := range strings.Split(strings.TrimSpace(rec), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || f[1] != "0x0" {
			t.Fatalf("debug=1 frame line %q, want #, 0x0, function, file:line", line)
		}
		fns = append(fns, f[2])
	}
	if !inOrder(fns, spinChain...) {
		t.Errorf("debug=1 running record's functions %q", fns)
	}
}

func TestWriteThreadsRunningProto(t *testing.T) {
	s := spinning(t)
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 1 || p.Sample[0].Label["state"][0] != "running" {
		t.Fatalf("debug=0: %v", p)
	}
	if fns := sampleFuncs(p.Sample[0]); !inOrder(fns, spinChain...) {
		t.Errorf("debug=0 running thread's functions %q", fns)
	}
	for _, loc := range p.Sample[0].Location {
		if loc.Line[0].Line == 0 || loc.Line[0].Function.Filename == "" {
			t.Errorf("location %v has no file or line", loc)
		}
	}
}

func TestWriteThreadsRunningJSON(t *testing.T) {
	s := spinning(t)
	var buf bytes.Buffer
	if err := WriteThreadsJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	schema := loadSchema(t)
	var v any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for _, e := range validate(schema, schema, v, "$") {
		t.Error(e)
	}
	var d jsonDump
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	cs := d.ThreadDump.ThreadContainers
	if len(cs) != 1 || len(cs[0].Threads) != 1 || cs[0].Threads[0].State != "running" {
		t.Fatalf("JSON: %s", buf.String())
	}
	if st := cs[0].Threads[0].Stack; !inOrder(st, spinChain...) {
		t.Errorf("JSON running thread's stack %q", st)
	}
}
