package continuation_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// Tests of lazy thaw. On the stack-copying backend a resume thaws only the
// innermost frames and leaves a return barrier (arch.Thaw) beneath them;
// the frames still frozen are thawed as the frames above return into the
// barrier. These tests cross the barrier in every way a frame can leave:
// returning results of every kind (in registers and on the stack), with
// arguments in the barrier's argument area, panicking with deferred calls
// pending in frozen frames, recovering there and yielding again, and
// runtime.Goexit. Each compares with the same code run plainly. On the
// portable backend they check the same semantics, which hold trivially.

// barNode is a heap value a frame returns.
type barNode struct{ v int }

// barBig is returned by value; it needs more integer registers than the
// ABI has, so it is returned on the stack, in the caller's frame: across
// the barrier that is the barrier's argument area.
type barBig struct {
	a, b, c, d, e, f, g, h, i, j, k int
	s                               string
	p                               *barNode
}

func barBigFor(d int) barBig {
	return barBig{d, d + 1, d + 2, d + 3, d + 4, d + 5, d + 6, d + 7, d + 8, d + 9, d + 10, fmt.Sprint("big", d), &barNode{d}}
}

// barResults recurses depth levels and yields yields times at the bottom.
// Every level returns values of many kinds, computed from its depth, which
// its caller checks; every third level also takes a large array by value,
// too large for the barrier's argument area, so that such a frame is never
// a record's outermost.
//
//go:noinline
func barResults(s *scope.Scope, d, yields int, bad *[]string) (int, float64, string, *barNode, barBig, complex128, any, error) {
	pad := [8]int{d, d, d, d, d, d, d, d}
	if d == 0 {
		for range yields {
			continuation.Yield(s)
			runtime.GC()
		}
	} else {
		var i int
		var f float64
		var str string
		var p *barNode
		var big barBig
		var c complex128
		var a any
		var err error
		if d%3 == 0 {
			var arr [40]int // 320 bytes of arguments
			arr[d%40] = d
			i, f, str, p, big, c, a, err = barResultsArr(s, d-1, yields, bad, arr)
		} else {
			i, f, str, p, big, c, a, err = barResults(s, d-1, yields, bad)
		}
		e := d - 1
		if i != e*3 || f != float64(e)/7 || str != fmt.Sprint("s", e) || p.v != e || big != (barBig{e, e + 1, e + 2, e + 3, e + 4, e + 5, e + 6, e + 7, e + 8, e + 9, e + 10, big.s, big.p}) || big.s != fmt.Sprint("big", e) || big.p.v != e || c != complex(float64(e), -float64(e)) || a.(string) != fmt.Sprint("any", e) || err.Error() != fmt.Sprint("err", e) {
			*bad = append(*bad, fmt.Sprintf("depth %d got %v %v %q %v %v %v %v %v", d, i, f, str, p, big, c, a, err))
		}
	}
	for k := range pad {
		if pad[k] != d {
			*bad = append(*bad, fmt.Sprintf("depth %d: local changed to %d", d, pad[k]))
		}
	}
	return d * 3, float64(d) / 7, fmt.Sprint("s", d), &barNode{d}, barBigFor(d), complex(float64(d), -float64(d)), fmt.Sprint("any", d), errors.New(fmt.Sprint("err", d))
}

//go:noinline
func barResultsArr(s *scope.Scope, d, yields int, bad *[]string, arr [40]int) (int, float64, string, *barNode, barBig, complex128, any, error) {
	if arr[(d+1)%40] != d+1 {
		*bad = append(*bad, fmt.Sprintf("depth %d: array argument lost", d))
	}
	return barResults(s, d, yields, bad)
}

func TestBarrierCarriesResults(t *testing.T) {
	for _, depth := range []int{1, 4, 9, 30, 200} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			s := scope.New("results")
			var bad []string
			var top int
			c := continuation.New(s, func() {
				top, _, _, _, _, _, _, _ = barResults(s, depth, 3, &bad)
			})
			for i := 0; !c.IsDone(); i++ {
				if i%2 == 1 {
					diffRunElsewhere(c)
				} else {
					c.Run()
				}
				runtime.GC()
			}
			for _, b := range bad {
				t.Error(b)
			}
			if top != depth*3 {
				t.Errorf("the body's call returned %d, want %d", top, depth*3)
			}
			if st := c.Stats(); gcsStackCopy() && st.FramesThawed != st.FramesFrozen {
				t.Errorf("%d frames frozen but %d thawed", st.FramesFrozen, st.FramesThawed)
			}
		})
	}
}

// gcsLazy reports whether this process thaws lazily: the stack-copying
// backend, not told to thaw eagerly.
func gcsLazy() bool {
	return gcsStackCopy() && !strings.Contains(continuation.Backend(), "eager thaw")
}

// barLoop yields iters times at depth d, adding to a local each time.
//
//go:noinline
func barLoop(s *scope.Scope, d, iters int) int {
	local := d*7 + 1
	if d == 0 {
		for i := range iters {
			continuation.Yield(s)
			local += i
		}
		return local
	}
	return barLoop(s, d-1, iters) + local
}

// A yield loop 200 frames deep freezes and thaws a bounded number of frames
// per round trip, whatever the depth, and every frame frozen is thawed once.
func TestLazyThawBoundedPerYield(t *testing.T) {
	if !gcsLazy() {
		t.Skip("lazy thaw is the stack-copying backend's default policy; this process runs " + continuation.Backend())
	}
	const depth, iters = 200, 100
	s := scope.New("lazy")
	var got int
	c := continuation.New(s, func() { got = barLoop(s, depth, iters) })
	c.Run()
	first := c.Stats()
	if first.FramesFrozen < depth {
		t.Fatalf("the first yield froze %d frames, want at least %d", first.FramesFrozen, depth)
	}
	prev := first
	var perTrip uint64
	for i := 1; i < iters; i++ {
		c.Run()
		st := c.Stats()
		frozen, thawed := st.FramesFrozen-prev.FramesFrozen, st.FramesThawed-prev.FramesThawed
		if frozen > 8 || thawed > 8 || frozen == 0 || thawed == 0 {
			t.Fatalf("round trip %d at depth %d froze %d frames and thawed %d, want 1 to 8 each", i, depth, frozen, thawed)
		}
		prev, perTrip = st, frozen
	}
	c.Run() // the loop ends and every frame returns through the barrier
	if !c.IsDone() {
		t.Fatal("the body did not finish")
	}
	st := c.Stats()
	if st.FramesThawed != st.FramesFrozen {
		t.Errorf("%d frames frozen but %d thawed", st.FramesFrozen, st.FramesThawed)
	}
	want := 0
	for i := range iters {
		want += i
	}
	for d := 0; d <= depth; d++ {
		want += d*7 + 1
	}
	if got != want {
		t.Errorf("the body computed %d, want %d", got, want)
	}
	t.Logf("first yield froze %d frames; a round trip at depth %d freezes and thaws %d", first.FramesFrozen, depth, perTrip)
}

// barPanic is the panic value the panic tests raise.
type barPanic struct{ at int }

// barUnwind recurses depth levels. Levels divisible by deferEvery defer a
// call that logs; level recoverAt (if ≥ 0) recovers and returns -1, and
// its caller yields once more if yieldAfter. At the bottom it yields, then
// panics (or calls runtime.Goexit). Levels whose deferred calls panic
// again (repanicAt) replace the panic in flight.
type barUnwind struct {
	s                       *scope.Scope
	log                     []string
	deferEvery, recoverAt   int
	repanicAt               int
	goexit, yieldAfter      bool
	inCont                  bool
	yieldAfterOK            bool
	resumedAfterRecoverSeen bool
}

//go:noinline
func (u *barUnwind) level(d int) (res int) {
	if d%u.deferEvery == 0 {
		defer func() { u.log = append(u.log, fmt.Sprint("defer ", d)) }()
	}
	if d == u.repanicAt {
		defer func() { panic(fmt.Sprint("again at ", d)) }()
	}
	if d == u.recoverAt {
		defer func() {
			r := recover()
			u.log = append(u.log, fmt.Sprint("recovered ", r, " at ", d))
			res = -1
		}()
	}
	if d == 0 {
		u.yield()
		u.log = append(u.log, "bottom")
		if u.goexit {
			runtime.Goexit()
		}
		panic(barPanic{7})
	}
	r := u.level(d - 1)
	if r == -1 && u.yieldAfter {
		u.yieldAfterOK = u.yield()
		u.log = append(u.log, fmt.Sprint("yielded after recovery at ", d))
	}
	u.log = append(u.log, fmt.Sprint("return ", d))
	return r + d
}

func (u *barUnwind) yield() bool {
	if u.inCont {
		return continuation.Yield(u.s)
	}
	return true
}

// run runs u to the end, plainly or in a continuation resumed on other
// goroutines, and returns its log, what it returned and the panic value
// that escaped, if any; Goexit is run on a goroutine of its own.
func (u *barUnwind) run(depth int) (log []string, ret int, panicked any) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		if !u.inCont {
			ret = u.level(depth)
			return
		}
		c := continuation.New(u.s, func() { ret = u.level(depth) })
		c.Run()
		for !c.IsDone() {
			runtime.GC()
			diffRunElsewhere(c)
		}
	}()
	<-done
	return u.log, ret, panicked
}

func TestBarrierPanicsAndGoexit(t *testing.T) {
	type tc struct {
		name                  string
		depth, deferEvery     int
		recoverAt, repanicAt  int
		goexit, yieldAfter    bool
		wantRecover, wantExit bool
	}
	var cases []tc
	for _, depth := range []int{2, 6, 13, 40, 150} {
		for _, every := range []int{1, 4, 11} {
			cases = append(cases,
				tc{name: "panic", depth: depth, deferEvery: every, recoverAt: -1, repanicAt: -1},
				tc{name: "goexit", depth: depth, deferEvery: every, recoverAt: -1, repanicAt: -1, goexit: true},
				tc{name: "recover", depth: depth, deferEvery: every, recoverAt: depth * 2 / 3, repanicAt: -1, yieldAfter: true},
				tc{name: "repanic", depth: depth, deferEvery: every, recoverAt: -1, repanicAt: depth / 2},
				tc{name: "repanic-recover", depth: depth, deferEvery: every, recoverAt: depth - 1, repanicAt: depth / 3},
				// A deferred call that panics during runtime.Goexit: the
				// panic runs the remaining deferred calls, and once it is
				// recovered (or reaches the goroutine's top) the Goexit
				// goes on; the frame that recovered does not return.
				tc{name: "goexit-repanic", depth: depth, deferEvery: every, recoverAt: -1, repanicAt: depth / 2, goexit: true},
				tc{name: "goexit-repanic-recover", depth: depth, deferEvery: every, recoverAt: depth - 1, repanicAt: depth / 3, goexit: true},
				tc{name: "goexit-repanic-bottom", depth: depth, deferEvery: every, recoverAt: depth / 2, repanicAt: 0, goexit: true},
			)
		}
	}
	for _, k := range cases {
		t.Run(fmt.Sprintf("%s/depth=%d/every=%d", k.name, k.depth, k.deferEvery), func(t *testing.T) {
			mk := func(inCont bool) *barUnwind {
				return &barUnwind{s: scope.New("unwind"), deferEvery: k.deferEvery, recoverAt: k.recoverAt,
					repanicAt: k.repanicAt, goexit: k.goexit, yieldAfter: k.yieldAfter, inCont: inCont}
			}
			plain := mk(false)
			wantLog, wantRet, wantPanic := plain.run(k.depth)
			cont := mk(true)
			gotLog, gotRet, gotPanic := cont.run(k.depth)
			if !slices.Equal(gotLog, wantLog) {
				t.Errorf("log in a continuation:\n%s\nplain:\n%s", strings.Join(gotLog, "\n"), strings.Join(wantLog, "\n"))
			}
			if gotRet != wantRet || fmt.Sprint(gotPanic) != fmt.Sprint(wantPanic) {
				t.Errorf("continuation returned %d and panicked %v; plain returned %d and panicked %v", gotRet, gotPanic, wantRet, wantPanic)
			}
			if k.yieldAfter && k.recoverAt >= 0 && !cont.yieldAfterOK {
				t.Error("a yield after a frozen frame recovered was pinned; after a recover the stack is ordinary again")
			}
		})
	}
}

// A Goexit below Run (Run called by a deferred call of a Goexit) does not
// go on when a frame in the continuation recovers a panic: only a Goexit
// that began above the barrier does. A frozen frame that recovers a panic
// crossing the barrier returns, and the body carries on, as in plain Go.
func TestBarrierRecoverInRunDeferredByGoexit(t *testing.T) {
	for _, every := range []int{1, 4, 11} {
		mk := func(inCont bool) *barUnwind {
			return &barUnwind{s: scope.New("under-goexit"), deferEvery: every, recoverAt: 27, repanicAt: -1,
				yieldAfter: true, inCont: inCont}
		}
		plain := mk(false)
		wantLog, wantRet, _ := plain.run(40)
		cont := mk(true)
		var gotRet int
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				c := continuation.New(cont.s, func() { gotRet = cont.level(40) })
				for !c.IsDone() {
					c.Run()
					runtime.GC()
				}
			}()
			runtime.Goexit()
		}()
		<-done
		if !slices.Equal(cont.log, wantLog) || gotRet != wantRet {
			t.Errorf("every=%d: run by a deferred call of Goexit, the continuation logged\n%s\nand returned %d; plain:\n%s\nreturned %d",
				every, strings.Join(cont.log, "\n"), gotRet, strings.Join(wantLog, "\n"), wantRet)
		}
		if !cont.yieldAfterOK {
			t.Errorf("every=%d: the yield after the recovery was pinned", every)
		}
	}
}

// Tracebacks and runtime.Callers from thawed frames walk through the
// barrier to Run's caller.
func TestBarrierTraceback(t *testing.T) {
	s := scope.New("trace")
	var names []string
	var stack string
	var inner func(d int)
	inner = func(d int) {
		if d > 0 {
			inner(d - 1)
			return
		}
		continuation.Yield(s)
		pcs := make([]uintptr, 256)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
		for {
			f, more := frames.Next()
			names = append(names, f.Function)
			if !more {
				break
			}
		}
		buf := make([]byte, 1<<16)
		stack = string(buf[:runtime.Stack(buf, false)])
	}
	c := continuation.New(s, func() { inner(40) })
	c.Run()
	runtime.GC()
	c.Run()
	if !c.IsDone() {
		t.Fatal("not done")
	}
	if strings.Contains(stack, "unexpected return pc") {
		t.Errorf("runtime.Stack from a thawed frame:\n%s", stack)
	}
	if !gcsStackCopy() {
		return // the body runs on a goroutine of its own
	}
	me := "TestBarrierTraceback"
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, me) }) {
		t.Errorf("runtime.Callers from a thawed frame does not reach Run's caller %s:\n%s", me, strings.Join(names, "\n"))
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, "arch.Thaw") }) {
		t.Errorf("runtime.Callers from a thawed frame does not show the return barrier:\n%s", strings.Join(names, "\n"))
	}
	if !strings.Contains(stack, me) {
		t.Errorf("runtime.Stack from a thawed frame:\n%s", stack)
	}
}

// Floating-point results in X registers cross the barrier bit for bit.
//
//go:noinline
func barFloats(s *scope.Scope, d int) (float64, float32, float64, float64) {
	if d == 0 {
		continuation.Yield(s)
		return math.Float64frombits(gcsNaN64(1)), math.Float32frombits(gcsNaN32(2)), math.Inf(-1), math.Copysign(0, -1)
	}
	a, b, c, e := barFloats(s, d-1)
	return a, b, c, e
}

func TestBarrierFloatResults(t *testing.T) {
	s := scope.New("floats")
	var a, c, e float64
	var b float32
	k := continuation.New(s, func() { a, b, c, e = barFloats(s, 60) })
	k.Run()
	runtime.GC()
	k.Run()
	if math.Float64bits(a) != gcsNaN64(1) || math.Float32bits(b) != gcsNaN32(2) || !math.IsInf(c, -1) || math.Float64bits(e) != 1<<63 {
		t.Errorf("got %x %x %v %x", math.Float64bits(a), math.Float32bits(b), c, math.Float64bits(e))
	}
}

// A CPU profile taken while a continuation yields in a loop deep in a call
// stack is readable by go tool pprof, and its samples walk through the
// return barrier to the code that calls Run.
func TestBarrierCPUProfile(t *testing.T) {
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs to run go tool pprof, and os/exec cannot start processes on " + runtime.GOOS)
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("needs the go command to run go tool pprof: %v", err)
	}
	file := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Skipf("a CPU profile is already running: %v", err)
	}
	s := scope.New("profiled")
	stop := false
	c := continuation.New(s, func() {
		var spin func(d int)
		spin = func(d int) {
			if d > 0 {
				spin(d - 1)
				return
			}
			for !stop {
				x := 0
				for i := range 2000 { // some work in the thawed frames
					x += i * i
				}
				barSink = x
				continuation.Yield(s)
			}
		}
		spin(60)
	})
	for deadline := time.Now().Add(600 * time.Millisecond); time.Now().Before(deadline); {
		c.Run()
	}
	stop = true
	c.Run()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gobin, "tool", "pprof", "-traces", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	text := string(out)
	if !strings.Contains(text, "TestBarrierCPUProfile") {
		t.Fatalf("no sample reaches the test function:\n%s", text)
	}
	if gcsLazy() && !strings.Contains(text, "arch.Thaw") {
		t.Fatalf("no sample walks through the return barrier:\n%s", text)
	}
}

var barSink int
