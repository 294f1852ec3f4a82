package weft

import (
	"runtime"
	"strings"
	"testing"

	"github.com/weftrt/weft/scope"
)

// fpLoop recurses depth frames and yields yields times at the bottom.
//
//go:noinline
func fpLoop(s *scope.Scope, depth, yields int) int {
	if depth == 0 {
		for range yields {
			Yield(s)
			runtime.GC() // a collection between yields, for the GC stress runs
		}
		return 0
	}
	return fpLoop(s, depth-1, yields) + 1
}

// withFreezeRate runs f with the freeze/thaw profile at rate, and puts
// the rate back after.
func withFreezeRate(t *testing.T, rate int) {
	t.Helper()
	old := FreezeProfileRate()
	SetFreezeProfileRate(rate)
	t.Cleanup(func() { SetFreezeProfileRate(old) })
}

// freezeRecordsOf returns the profile's records whose stack has a frame
// of a function whose name ends in fn, summed.
func freezeRecordsOf(fn string) (sum FreezeRecord, recs []FreezeRecord) {
	for _, r := range FreezeProfile() {
		if stackHas(r.Stack, fn) {
			recs = append(recs, r)
			sum.Captures += r.Captures
			sum.Templated += r.Templated
			sum.FramesFrozen += r.FramesFrozen
			sum.BytesFrozen += r.BytesFrozen
			sum.Thaws += r.Thaws
			sum.FramesThawed += r.FramesThawed
			sum.BytesThawed += r.BytesThawed
			sum.Crossings += r.Crossings
		}
	}
	return sum, recs
}

// sub returns r less o, count by count, with r's stack.
func (r FreezeRecord) sub(o FreezeRecord) FreezeRecord {
	r.Captures -= o.Captures
	r.Templated -= o.Templated
	r.FramesFrozen -= o.FramesFrozen
	r.BytesFrozen -= o.BytesFrozen
	r.Thaws -= o.Thaws
	r.FramesThawed -= o.FramesThawed
	r.BytesThawed -= o.BytesThawed
	r.Crossings -= o.Crossings
	return r
}

// stackHas reports whether a frame of pcs is in a function whose name
// ends in fn.
func stackHas(pcs []uintptr, fn string) bool {
	for _, pc := range pcs {
		if f := runtime.FuncForPC(pc - 1); f != nil && strings.HasSuffix(f.Name(), fn) {
			return true
		}
	}
	return false
}

// leadingFrames counts the frames at the top of pcs in a function whose
// name ends in fn.
func leadingFrames(pcs []uintptr, fn string) int {
	n := 0
	for _, pc := range pcs {
		if f := runtime.FuncForPC(pc - 1); f == nil || !strings.HasSuffix(f.Name(), fn) {
			break
		}
		n++
	}
	return n
}

// runContToEnd runs c until its body returns.
func runContToEnd(t *testing.T, c *Cont) {
	t.Helper()
	for i := 0; !c.IsDone(); i++ {
		if i > 1000 {
			t.Fatal("the body did not finish")
		}
		c.Run(nil)
		runtime.GC()
	}
}

// A yield loop at a known depth, profiled at rate 1, gives one call chain
// whose counts are the continuation's Stats: every capture and resume,
// the frames and bytes each copied, and the fast path told from the
// general one. On the portable backend, which copies no frames, only the
// counts of captures and thaws.
func TestFreezeProfileYieldLoop(t *testing.T) {
	withFreezeRate(t, 1)
	const depth, yields = 10, 6
	s := scope.New("fp")
	c := NewCont(s, func() { fpLoop(s, depth, yields) })
	before, _ := freezeRecordsOf(".fpLoop") // the profile keeps earlier runs'
	runContToEnd(t, c)
	st := c.Stats()
	sum, recs := freezeRecordsOf(".fpLoop")
	sum = sum.sub(before)
	if len(recs) != 1 {
		t.Fatalf("%d records with fpLoop frames, want 1 (one call chain): %+v", len(recs), recs)
	}
	if got := leadingFrames(recs[0].Stack, ".fpLoop"); got != depth+1 {
		t.Errorf("the record's stack starts with %d fpLoop frames, want %d", got, depth+1)
	}
	// It ends with the body, on either backend.
	if st := recs[0].Stack; len(st) == 0 || !stackHas(st[len(st)-1:], ".TestFreezeProfileYieldLoop.func1") {
		t.Errorf("the record's stack does not end with the body: %v", runtimeFrames(st))
	}
	if sum.Captures != yields || sum.Captures != st.Yields {
		t.Errorf("captures %d, want %d (Stats.Yields %d)", sum.Captures, yields, st.Yields)
	}
	if sum.Thaws != yields || sum.Thaws != st.Runs-1 {
		t.Errorf("thaws %d, want %d (Stats.Runs %d, less the first)", sum.Thaws, yields, st.Runs)
	}
	if sum.FramesFrozen != st.FramesFrozen || sum.BytesFrozen != st.BytesFrozen ||
		sum.FramesThawed != st.FramesThawed || sum.BytesThawed != st.BytesThawed ||
		sum.Templated != st.Templated {
		t.Errorf("profile %+v, Stats %+v: frames, bytes or templated captures differ", sum, st)
	}
	if ActiveBackend() != StackCopying {
		if sum.FramesFrozen != 0 || sum.BytesFrozen != 0 || sum.FramesThawed != 0 || sum.BytesThawed != 0 ||
			sum.Templated != 0 || sum.Crossings != 0 {
			t.Errorf("portable backend: profile %+v, want only counts of captures and thaws", sum)
		}
		return
	}
	if sum.FramesFrozen < depth+1 || sum.BytesFrozen == 0 || sum.FramesThawed < depth+1 {
		t.Errorf("stack-copying backend: profile %+v froze or thawed too little", sum)
	}
	// The first capture takes the general path and makes a template
	// for later ones.
	if sum.Templated == 0 || sum.Templated >= sum.Captures {
		t.Errorf("templated captures %d of %d, want some but not the first", sum.Templated, sum.Captures)
	}
}

// Rate 0 records nothing; rate n counts each recorded event n times.
func TestFreezeProfileRate(t *testing.T) {
	s := scope.New("fp")
	withFreezeRate(t, 0)
	c := NewCont(s, func() { fpRate0(s) })
	runContToEnd(t, c)
	if _, recs := freezeRecordsOf(".fpRate0"); len(recs) != 0 {
		t.Errorf("rate 0 recorded %+v", recs)
	}
	before, _ := freezeRecordsOf(".fpRate3")
	SetFreezeProfileRate(3)
	if got := FreezeProfileRate(); got != 3 {
		t.Fatalf("FreezeProfileRate() = %d, want 3", got)
	}
	c = NewCont(s, func() { fpRate3(s) })
	runContToEnd(t, c)
	sum, _ := freezeRecordsOf(".fpRate3")
	sum = sum.sub(before)
	if sum.Captures%3 != 0 || sum.Thaws%3 != 0 || sum.FramesFrozen%3 != 0 || sum.BytesThawed%3 != 0 {
		t.Errorf("rate 3: %+v, want every count a multiple of 3", sum)
	}
	if sum.Captures > 3*fpRateYields || sum.Thaws > 3*fpRateYields {
		t.Errorf("rate 3: %+v, more than 3 × %d events", sum, fpRateYields)
	}
	SetFreezeProfileRate(-1)
	if got := FreezeProfileRate(); got != 0 {
		t.Errorf("FreezeProfileRate() after SetFreezeProfileRate(-1) = %d, want 0", got)
	}
}

const fpRateYields = 50

//go:noinline
func fpRate0(s *scope.Scope) {
	for range fpRateYields {
		Yield(s)
	}
}

//go:noinline
func fpRate3(s *scope.Scope) {
	for range fpRateYields {
		Yield(s)
	}
}

// runtimeFrames names the functions of pcs, for a failure message.
func runtimeFrames(pcs []uintptr) []string {
	var out []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		out = append(out, f.Function)
		if !more {
			return out
		}
	}
}
