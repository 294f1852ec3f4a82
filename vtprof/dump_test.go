package vtprof

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/scheduler"
)

func TestWriteThreadsProto(t *testing.T) {
	const n = 6
	s, _ := parked(t, n)
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	workers := map[string]bool{}
	for _, smp := range p.Sample {
		total += smp.Value[0]
		if st := smp.Label["state"]; len(st) != 1 || st[0] != "parked" {
			t.Errorf("sample state %v, want parked", st)
		}
		for _, w := range smp.Label["worker"] {
			workers[w] = true
		}
		fns := sampleFuncs(smp)
		if got := countFunc(fns, ".parkDeep"); got != parkDepth {
			t.Errorf("%d parkDeep frames, want %d: %v", got, parkDepth, fns)
		}
		if !strings.HasSuffix(fns[len(fns)-1], "scheduler.vthreadBody") {
			t.Errorf("stack does not end at the body: %v", fns)
		}
	}
	if total != n || len(workers) != n {
		t.Errorf("%d threads with %d worker labels, want %d", total, len(workers), n)
	}
}

func TestWriteThreadsText(t *testing.T) {
	const n = 4
	s, vts := parked(t, n)
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 1); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, fmt.Sprintf("vthread profile: total %d\n", n)) {
		t.Errorf("debug=1 header: %q", out[:min(len(out), 80)])
	}
	if got := strings.Count(out, "state: parked"); got != n { // each thread has labels of its own
		t.Errorf("%d records parked, want %d:\n%s", got, n, out)
	}
	if got := strings.Count(out, ".parkDeep+"); got != n*parkDepth {
		t.Errorf("%d parkDeep lines, want %d", got, n*parkDepth)
	}

	buf.Reset()
	if err := WriteThreads(&buf, s, 2); err != nil {
		t.Fatal(err)
	}
	out = buf.String()
	blocks := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(blocks) != n {
		t.Fatalf("debug=2 has %d blocks, want %d:\n%s", len(blocks), n, out)
	}
	head := regexp.MustCompile(`^vthread (\d+)( "worker-\d+")? \[parked, [^\]]+\]:\nlabels: \{"worker":"\d+"\}\n(group: 1\n)?`)
	ids := map[uint64]bool{}
	for _, vt := range vts {
		ids[vt.ID()] = true
	}
	for _, b := range blocks {
		m := head.FindStringSubmatch(b)
		if m == nil {
			t.Errorf("block header:\n%s", b)
			continue
		}
		id, _ := strconv.ParseUint(m[1], 10, 64)
		if !ids[id] {
			t.Errorf("block of thread %d, not one of the test's", id)
		}
		if got := strings.Count(b, ".parkDeep(...)"); got != parkDepth {
			t.Errorf("thread %d: %d parkDeep frames, want %d", id, got, parkDepth)
		}
		if !strings.Contains(b, "created by ") || !strings.Contains(b, "vtprof.parked") {
			t.Errorf("thread %d: no creation site:\n%s", id, b)
		}
	}
}

func TestWriteThreadsUntracked(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vt, _ := s.Go(func(context.Context) error { scheduler.Park(); return nil })
	for s.State().Carriers[0].Idle == false || s.Live() != 1 {
		time.Sleep(time.Millisecond)
	}
	defer vt.Unpark()
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 1 || p.Sample[0].Value[0] != 1 || p.Sample[0].Label["state"][0] != "untracked" {
		t.Errorf("untracked debug=0: %v", p)
	}
	for debug, want := range []string{"", "vthread profile: total 1\n", "# 1 virtual threads live"} {
		if debug == 0 {
			continue
		}
		buf.Reset()
		if err := WriteThreads(&buf, s, debug); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(buf.String(), want) {
			t.Errorf("untracked debug=%d: %q, want it to start %q", debug, buf.String(), want)
		}
	}
	buf.Reset()
	if err := WriteThreadsJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	var d jsonDump
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.ThreadDump.Tracking || d.ThreadDump.Live != 1 || len(d.ThreadDump.ThreadContainers[0].Threads) != 0 {
		t.Errorf("untracked JSON: %s", buf.String())
	}
}

// TestWriteThreadsMany dumps 100,000 parked virtual threads (10,000 with
// -short or the race detector).
func TestWriteThreadsMany(t *testing.T) {
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 10_000
	}
	s, err := scheduler.New(scheduler.Options{TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	var parkedN atomic.Int64
	vts := make([]*scheduler.VThread, n)
	for i := range vts {
		vts[i], err = s.Go(func(context.Context) error {
			parkedN.Add(1)
			parkDeep(parkDepth - 1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, vt := range vts {
			vt.Unpark()
		}
		s.Close()
	}()
	for {
		// Each has counted itself before it parked: wait until every
		// one has a stack to dump.
		if parkedN.Load() == int64(n) {
			parkedAll := 0
			for info := range s.Threads() {
				if info.State == scheduler.Parked && len(info.Stack) > 0 {
					parkedAll++
				}
			}
			if parkedAll == n {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	var buf bytes.Buffer
	if err := WriteThreads(&buf, s, 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, smp := range p.Sample {
		total += smp.Value[0]
		if got := countFunc(sampleFuncs(smp), ".parkDeep"); got != parkDepth {
			t.Errorf("%d parkDeep frames, want %d", got, parkDepth)
		}
	}
	if total != int64(n) || len(p.Sample) != 1 {
		t.Errorf("%d threads in %d samples, want %d in one", total, len(p.Sample), n)
	}
	buf.Reset()
	if err := WriteThreadsJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(buf.String(), `"tid"`); got != n {
		t.Errorf("the JSON dump has %d threads, want %d", got, n)
	}
}

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
