package vtprof

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/scope"
)

// freezeDepth is the depth at which freezeDeep yields.
const freezeDepth = 12

// freezeDeep recurses to depth 0 and yields there yields times.
//
//go:noinline
func freezeDeep(s *scope.Scope, depth, yields int) {
	if depth == 0 {
		for range yields {
			continuation.Yield(s)
		}
		return
	}
	freezeDeep(s, depth-1, yields)
}

// freezeRate sets the freeze/thaw profile's rate for the test.
func freezeRate(t *testing.T, rate int) {
	old := weft.FreezeProfileRate()
	weft.SetFreezeProfileRate(rate)
	t.Cleanup(func() { weft.SetFreezeProfileRate(old) })
}

// locFuncs counts the frames of a sample in functions whose name ends in
// suffix.
func locFuncs(s *profile.Sample, suffix string) int {
	n := 0
	for _, l := range s.Location {
		for _, ln := range l.Line {
			if strings.HasSuffix(ln.Function.Name, suffix) {
				n++
			}
		}
	}
	return n
}

// A yield loop at a known depth appears in the profile.proto as one
// sample, with the sample types the doc names, whose values are the
// continuation's Stats; the text format has it too, and go tool pprof
// reads the profile.
func TestFreezeProfile(t *testing.T) {
	freezeRate(t, 1)
	const yields = 5
	sc := scope.New("freeze")
	c := continuation.New(sc, func() { freezeDeep(sc, freezeDepth, yields) })
	find := func() (*profile.Profile, *profile.Sample) {
		var buf bytes.Buffer
		if err := WriteFreezeProfile(&buf, 0); err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(&buf)
		if err != nil {
			t.Fatal(err)
		}
		var found *profile.Sample
		for _, s := range p.Sample {
			if locFuncs(s, ".freezeDeep") > 0 {
				if found != nil {
					t.Fatalf("two samples with freezeDeep frames:\n%v", p)
				}
				found = s
			}
		}
		return p, found
	}
	_, before := find() // the profile keeps what earlier runs recorded
	for !c.IsDone() {
		c.Run()
	}
	p, s := find()
	if s == nil {
		t.Fatalf("no sample with freezeDeep frames:\n%v", p)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "captures/count templated/count frozen_frames/count frozen/bytes thaws/count thawed_frames/count thawed/bytes crossings/count" {
		t.Errorf("sample types %s", got)
	}
	if n := locFuncs(s, ".freezeDeep"); n != freezeDepth+1 {
		t.Errorf("the sample has %d freezeDeep frames, want %d:\n%v", n, freezeDepth+1, s)
	}
	v := append([]int64(nil), s.Value...)
	if before != nil {
		for i := range v {
			v[i] -= before.Value[i]
		}
	}
	st := c.Stats()
	want := []int64{int64(st.Yields), int64(st.Templated), int64(st.FramesFrozen), int64(st.BytesFrozen),
		int64(st.Runs - 1), int64(st.FramesThawed), int64(st.BytesThawed)}
	for i, w := range want {
		if v[i] != w {
			t.Errorf("%s: %d, want %d (Stats %+v)", p.SampleType[i].Type, v[i], w, st)
		}
	}
	if v[0] != yields {
		t.Errorf("captures %d, want %d", v[0], yields)
	}
	stackCopy := weft.ActiveBackend() == weft.StackCopying
	if (v[3] > 0) != stackCopy || (v[6] > 0) != stackCopy {
		t.Errorf("frozen %d bytes and thawed %d on the %s backend", v[3], v[6], weft.ActiveBackend())
	}

	var text bytes.Buffer
	if err := WriteFreezeProfile(&text, 1); err != nil {
		t.Fatal(err)
	}
	if out := text.String(); !strings.HasPrefix(out, "--- freeze:\nrate=1\n") || !strings.Contains(out, ".freezeDeep+") {
		t.Errorf("text profile:\n%s", out)
	}

	// go tool pprof -traces reads it.
	file := filepath.Join(t.TempDir(), "freeze.pb.gz")
	var buf bytes.Buffer
	if err := WriteFreezeProfile(&buf, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool(t), "tool", "pprof", "-traces", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -traces: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Type: captures") || !strings.Contains(string(out), "vtprof.freezeDeep") {
		t.Errorf("go tool pprof -traces:\n%s", out)
	}
}

// Virtual threads, whose records carry no Stats, are in the profile too:
// each park freezes the thread and each resume thaws it, at the park's
// call chain.
func TestFreezeProfileVirtualThreads(t *testing.T) {
	freezeRate(t, 1)
	count := func() (captures, thaws int64) {
		var buf bytes.Buffer
		if err := WriteFreezeProfile(&buf, 0); err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(&buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Sample {
			if locFuncs(s, ".parkDeep") == parkDepth {
				captures += s.Value[0]
				thaws += s.Value[4]
			}
		}
		return captures, thaws
	}
	c0, t0 := count()
	s, err := scheduler.New(scheduler.Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 3
	var vts []*scheduler.VThread
	for range n {
		vt, err := s.Go(func(context.Context) error { parkDeep(parkDepth - 1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		vts = append(vts, vt)
	}
	for _, vt := range vts {
		waitState(t, s, vt.ID(), scheduler.Parked)
		vt.Unpark()
	}
	for _, vt := range vts {
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
	}
	c1, t1 := count()
	if c1-c0 != n || t1-t0 != n {
		t.Errorf("%d captures and %d thaws at parkDeep's park, want %d of each", c1-c0, t1-t0, n)
	}
}
