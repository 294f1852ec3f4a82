package continuation_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/scope"
)

// GC stress tests for freeze and thaw. The stack-copying backend moves live
// Go frames behind the runtime's back: a yield copies them into heap arrays
// and a resume copies them back onto whichever goroutine calls Run. These
// tests keep values of every shape live across yields, referenced only from
// the suspended frames, collect garbage between every yield and resume and
// right after every resume, grow, shrink and migrate the stacks the frames
// live on, and check every value bit for bit after every resume. Run them
// with GOGC=1 GODEBUG=invalidptr=1,gccheckmark=1,clobberfree=1 too: memory
// the collector wrongly frees is then clobbered, and a stale or missed
// pointer crashes the collector or shows up as a changed value.
//
// The helpers here are prefixed gcs; the shared helpers of the other test
// files (gcBuild, gcCheck, gcGarbage, gcDeepCheck, gcFlushCleanups,
// gcPollUntil, leakStart, diffMix, diffStrHash) are reused.

// gcsStackCopy reports whether the stack-copying backend runs this process.
func gcsStackCopy() bool { return strings.HasPrefix(continuation.Backend(), "stackcopy") }

// gcsWord is the value of slot k in round r of the values seeded by seed.
func gcsWord(seed uint64, r, k int) uint64 {
	return diffMix(diffMix(seed, uint64(int64(r))), uint64(int64(k)))
}

// gcsNaN64 and gcsNaN32 return quiet NaNs with a non-zero payload taken from
// w: every bit of the payload must survive.
func gcsNaN64(w uint64) uint64 { return 0x7ff8000000000000 | w&0x0007ffffffffffff | 1 }
func gcsNaN32(w uint64) uint32 { return 0x7fc00000 | uint32(w)&0x003fffff | 1 }

// gcsString builds a string on the heap (never a constant).
//
//go:noinline
func gcsString(seed uint64, r, k int) string {
	w := gcsWord(seed, r, k)
	b := make([]byte, 0, 64)
	b = strconv.AppendUint(b, w, 16)
	b = append(b, '/')
	for i := range 8 + int(w%24) {
		b = append(b, byte('a'+diffMix(w, uint64(i))%26))
	}
	return string(b)
}

// gcsSlice builds a []uint64 whose length and elements derive from (seed, r, k).
//
//go:noinline
func gcsSlice(seed uint64, r, k int) []uint64 {
	w := gcsWord(seed, r, k)
	s := make([]uint64, 1+w%40, 1+w%40+w%3)
	for i := range s {
		s[i] = diffMix(w, uint64(i))
	}
	return s
}

func gcsSliceOK(s []uint64, seed uint64, r, k int) bool {
	w := gcsWord(seed, r, k)
	if uint64(len(s)) != 1+w%40 || uint64(cap(s)) != 1+w%40+w%3 {
		return false
	}
	for i, v := range s {
		if v != diffMix(w, uint64(i)) {
			return false
		}
	}
	return true
}

// gcsBox is a heap object with pointers (to itself, to a slice, to a string)
// and scalars inside.
type gcsBox struct {
	tag  uint64
	self *gcsBox
	data []uint64
	name string
	f    float64
}

//go:noinline
func gcsNewBox(seed uint64, r, k int) *gcsBox {
	w := gcsWord(seed, r, k)
	b := &gcsBox{tag: w, name: gcsString(seed, r, k+7000), f: math.Float64frombits(gcsNaN64(w))}
	b.self = b
	b.data = make([]uint64, 1+w%16)
	for i := range b.data {
		b.data[i] = diffMix(w, uint64(i)+1)
	}
	return b
}

func gcsBoxOK(b *gcsBox, seed uint64, r, k int) bool {
	w := gcsWord(seed, r, k)
	if b == nil || b.tag != w || b.self != b || b.name != gcsString(seed, r, k+7000) ||
		math.Float64bits(b.f) != gcsNaN64(w) || uint64(len(b.data)) != 1+w%16 {
		return false
	}
	for i, v := range b.data {
		if v != diffMix(w, uint64(i)+1) {
			return false
		}
	}
	return true
}

//go:noinline
func gcsNewWord(v uint64) *uint64 { p := new(uint64); *p = v; return p }

// gcsMap builds a map from heap strings to boxes.
//
//go:noinline
func gcsMap(seed uint64, r int) map[string]*gcsBox {
	n := 1 + int(gcsWord(seed, r, 99)%6)
	m := make(map[string]*gcsBox, n)
	for j := range n {
		m[gcsString(seed, r, 100+j)] = gcsNewBox(seed, r, 200+j)
	}
	return m
}

func gcsMapOK(m map[string]*gcsBox, seed uint64, r int) bool {
	n := 1 + int(gcsWord(seed, r, 99)%6)
	if len(m) != n {
		return false
	}
	for j := range n {
		if !gcsBoxOK(m[gcsString(seed, r, 100+j)], seed, r, 200+j) {
			return false
		}
	}
	return true
}

// gcsPair is a non-pointer value held in an interface.
type gcsPair struct{ a, b uint64 }

// gcsErr is a pointer held in an error interface.
type gcsErr struct {
	code uint64
	msg  string
}

func (e *gcsErr) Error() string { return e.msg }

// gcsMixed is a struct of pointers and scalars, kept as a local.
type gcsMixed struct {
	a  uint64
	p  *gcsBox
	f  float64
	s  string
	q  *uint64 // a local of the same frame
	b  [3]byte
	i  any
	sl []byte
	c  complex128
}

// gcsShared is a local struct of the body whose address the body passes to
// the callee that yields.
type gcsShared struct {
	round  int
	before uint64
	after  uint64
	box    *gcsBox
	arr    *[16]uint64 // a local array of the body
	name   string
}

// gcsHeapClosure returns a closure on the heap capturing heap values and a
// counter: its k-th call returns gcsHeapClosureWant(seed, k).
//
//go:noinline
func gcsHeapClosure(seed uint64) func() uint64 {
	s := gcsString(seed, -4, 0)
	b := gcsNewBox(seed, -4, 1)
	n := 0
	return func() uint64 { n++; return diffMix(diffStrHash(s)^b.tag, uint64(n)) }
}

func gcsHeapClosureWant(seed uint64, k int) uint64 {
	return diffMix(diffStrHash(gcsString(seed, -4, 0))^gcsWord(seed, -4, 1), uint64(k))
}

// gcsCallU64 calls f; f does not escape, so a closure passed here stays on
// the caller's stack, with pointers to the variables it captures.
//
//go:noinline
func gcsCallU64(f func() uint64) uint64 { return f() }

// gcsGoid returns the calling goroutine's id.
func gcsGoid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		if id, err := strconv.ParseInt(string(b[:i]), 10, 64); err == nil {
			return id
		}
	}
	return -1
}

// gcsStack returns the calling goroutine's stack bounds, if this build can
// read them.
func gcsStack() (lo, hi uintptr, ok bool) {
	g := rt.CurG()
	if g == nil {
		return 0, 0, false
	}
	return g.StackLo, g.StackHi, true
}

// gcsOnStack reports whether p points into the calling goroutine's stack
// (true when the bounds cannot be read).
func gcsOnStack(p unsafe.Pointer) bool {
	lo, hi, ok := gcsStack()
	return !ok || lo <= uintptr(p) && uintptr(p) < hi
}

// gcsEnv is what a body needs and what it reports; it lives on the heap,
// shared with the test.
type gcsEnv struct {
	name   string
	seed   uint64
	rounds int
	nodes  int         // length of the gcBuild list held across every yield
	yield  func(r int) // suspends the continuation in round r
	after  func(r int) // if set, called right after each resume, before the checks
	final  func()      // if set, called after the last round
	// noGC: the body and its callee do not collect garbage themselves
	// after each resume (a concurrent goroutine does).
	noGC   bool
	runner atomic.Int64 // the goroutine that called Run last (set by the driver)
	// runnerOf, if set, is the env whose runner the body runs on after each
	// resume (on the stack-copying backend; on the portable backend the
	// body runs on a goroutine of its own, never on the runner).
	runnerOf *gcsEnv
	resumes  atomic.Int64 // resumes seen by the body
	finished atomic.Bool  // the body returned

	mu   sync.Mutex
	errs []string
	nerr int
}

func (e *gcsEnv) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nerr++
	if len(e.errs) < 8 {
		e.errs = append(e.errs, msg)
	}
}

// failures returns the number of failures and the first few.
func (e *gcsEnv) failures() (int, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nerr, append([]string(nil), e.errs...)
}

// report fails the test with e's failures.
func (e *gcsEnv) report(t *testing.T) {
	t.Helper()
	if n, errs := e.failures(); n > 0 {
		t.Errorf("%s (seed %d): %d wrong values or checks, first:\n\t%s", e.name, e.seed, n, strings.Join(errs, "\n\t"))
	}
}

// gcsChecker records mismatches for one round.
type gcsChecker struct {
	e *gcsEnv
	r int
}

//go:noinline
func (c *gcsChecker) u64(what string, got, want uint64) {
	if got != want {
		c.e.fail("round %d: %s = %#x, want %#x", c.r, what, got, want)
	}
}

// str copies the strings it reports, so that what got and want point to
// does not escape: a local struct holding a string next to a pointer to
// another local stays on the stack.
//
//go:noinline
func (c *gcsChecker) str(what, got, want string) {
	if got != want {
		c.e.fail("round %d: %s = %q, want %q", c.r, what, string([]byte(got)), string([]byte(want)))
	}
}

//go:noinline
func (c *gcsChecker) ok(what string, cond bool) {
	if !cond {
		c.e.fail("round %d: %s", c.r, what)
	}
}

// runner checks that the body runs on the goroutine it should.
func (c *gcsChecker) runner() {
	o := c.e.runnerOf
	if o == nil {
		return
	}
	id, want := gcsGoid(), o.runner.Load()
	if gcsStackCopy() {
		if id != want {
			c.e.fail("round %d: resumed on goroutine %d, want %d (the caller of Run)", c.r, id, want)
		}
	} else if id == want {
		c.e.fail("round %d: portable body runs on the caller of Run, goroutine %d", c.r, id)
	}
}

// gcsYieldVia is the callee through which a body yields: the body passes
// it the address of a local struct, which it checks and writes after the
// resume. It holds a heap object of its own only in its frame.
//
//go:noinline
func gcsYieldVia(e *gcsEnv, sh *gcsShared, r int) {
	seed := e.seed
	mine := gcsNewBox(seed, r, 56)
	before := sh.before
	e.yield(r)
	if !e.noGC {
		runtime.GC()
	}
	c := gcsChecker{e: e, r: r}
	c.ok("callee: shared.round changed", sh.round == r)
	c.u64("callee: shared.before", sh.before, gcsWord(seed, r, 52))
	c.u64("callee: its copy of shared.before", before, gcsWord(seed, r, 52))
	c.ok("callee: shared.box is wrong", gcsBoxOK(sh.box, seed, r, 53))
	c.str("callee: shared.name", sh.name, gcsString(seed, r, 54))
	c.ok("callee: its own box is wrong", gcsBoxOK(mine, seed, r, 56))
	c.ok("callee: the body's local struct is not on the current goroutine's stack", gcsOnStack(unsafe.Pointer(sh)))
	c.ok("callee: the body's local array is not on the current goroutine's stack", gcsOnStack(unsafe.Pointer(sh.arr)))
	sh.after = gcsWord(seed, r, 55)
	sh.arr[(seed+1)%16] = gcsWord(seed, r, 60)
}

// gcsValuesBody keeps values of every kind live across e.rounds yields and
// checks them bit for bit after every resume. Some are set once and held
// across every yield, the others are fresh each round (the old ones become
// garbage).
//
//go:noinline
func gcsValuesBody(e *gcsEnv) {
	seed := e.seed
	c := gcsChecker{e: e, r: -1}

	// Held across every yield.
	head := gcBuild(seed, e.nodes)
	keepStr := gcsString(seed, -1, 0)
	keepStrData := unsafe.StringData(keepStr)
	keepBox := gcsNewBox(seed, -1, 1)
	var arr [16]uint64 // a local array; parr points into it
	for i := range arr {
		arr[i] = gcsWord(seed, -2, i)
	}
	hot, cold := int(seed%16), int((seed+1)%16)
	parr := &arr[hot]
	wantHot := arr[hot]
	var local uint64 // an address-taken local
	plocal := &local
	var counter uint64
	step := gcsWord(seed, -3, 0) | 1
	bump := func() uint64 { counter += step; return counter } // a closure on the stack, capturing counter
	hclo := gcsHeapClosure(seed)
	var sh gcsShared

	for r := 0; r < e.rounds; r++ {
		c.r = r
		vi := int(gcsWord(seed, r, 0))
		vi8 := int8(gcsWord(seed, r, 1))
		vu16 := uint16(gcsWord(seed, r, 2))
		vi32 := int32(gcsWord(seed, r, 3))
		vb := gcsWord(seed, r, 4)&1 == 1
		vnan := math.Float64frombits(gcsNaN64(gcsWord(seed, r, 5)))
		vf64 := math.Float64frombits(gcsWord(seed, r, 6)) // any bits: NaNs, infinities, subnormals
		vf32 := math.Float32frombits(gcsNaN32(gcsWord(seed, r, 7)))
		vneg0 := math.Copysign(0, -float64(1+r%2))
		vc128 := complex(math.Float64frombits(gcsNaN64(gcsWord(seed, r, 8))), math.Float64frombits(gcsWord(seed, r, 9)))
		vc64 := complex(math.Float32frombits(uint32(gcsWord(seed, r, 10))), math.Float32frombits(gcsNaN32(gcsWord(seed, r, 11))))
		vstr := gcsString(seed, r, 12)
		vstrData := unsafe.StringData(vstr)
		vslice := gcsSlice(seed, r, 13)
		vsliceData := unsafe.SliceData(vslice)
		var vptrs [8]*uint64 // an array of pointers
		for i := range vptrs {
			vptrs[i] = gcsNewWord(gcsWord(seed, r, 20+i))
		}
		vmap := gcsMap(seed, r)
		var vifPtr any = gcsNewBox(seed, r, 30)
		var vifInt any = gcsWord(seed, r, 31)
		var vifPair any = gcsPair{gcsWord(seed, r, 32), gcsWord(seed, r, 33)}
		var vifNaN any = math.Float64frombits(gcsNaN64(gcsWord(seed, r, 34)))
		var vifSmall any = uint8(gcsWord(seed, r, 35))
		var verr error = &gcsErr{code: gcsWord(seed, r, 36), msg: gcsString(seed, r, 37)}
		local = gcsWord(seed, r, 50)
		vmix := gcsMixed{
			a:  gcsWord(seed, r, 40),
			p:  gcsNewBox(seed, r, 41),
			f:  math.Float64frombits(gcsNaN64(gcsWord(seed, r, 42))),
			s:  gcsString(seed, r, 43),
			q:  &local,
			b:  [3]byte{byte(gcsWord(seed, r, 44)), byte(gcsWord(seed, r, 45)), byte(gcsWord(seed, r, 46))},
			i:  gcsNewBox(seed, r, 47),
			sl: []byte(gcsString(seed, r, 48)),
			c:  complex(math.Float64frombits(gcsWord(seed, r, 49)), math.Float64frombits(gcsNaN64(gcsWord(seed, r, 49)))),
		}
		*parr ^= gcsWord(seed, r, 51)
		wantHot ^= gcsWord(seed, r, 51)
		bumped := gcsCallU64(bump)
		sh = gcsShared{round: r, before: gcsWord(seed, r, 52), box: gcsNewBox(seed, r, 53), arr: &arr, name: gcsString(seed, r, 54)}
		gcGarbage(20)

		gcsYieldVia(e, &sh, r)

		if !e.noGC {
			runtime.GC()
		}
		gcGarbage(20)
		e.resumes.Add(1)
		c.runner()
		if e.after != nil {
			e.after(r)
		}

		c.u64("int", uint64(vi), gcsWord(seed, r, 0))
		c.u64("int8", uint64(vi8), uint64(int8(gcsWord(seed, r, 1))))
		c.u64("uint16", uint64(vu16), uint64(uint16(gcsWord(seed, r, 2))))
		c.u64("int32", uint64(vi32), uint64(int32(gcsWord(seed, r, 3))))
		c.ok("bool changed", vb == (gcsWord(seed, r, 4)&1 == 1))
		c.u64("NaN float64 bits", math.Float64bits(vnan), gcsNaN64(gcsWord(seed, r, 5)))
		c.u64("float64 bits", math.Float64bits(vf64), gcsWord(seed, r, 6))
		c.u64("NaN float32 bits", uint64(math.Float32bits(vf32)), uint64(gcsNaN32(gcsWord(seed, r, 7))))
		c.ok("-0 lost its sign", math.Float64bits(vneg0) == 1<<63)
		c.u64("complex128 real bits", math.Float64bits(real(vc128)), gcsNaN64(gcsWord(seed, r, 8)))
		c.u64("complex128 imaginary bits", math.Float64bits(imag(vc128)), gcsWord(seed, r, 9))
		c.u64("complex64 real bits", uint64(math.Float32bits(real(vc64))), uint64(uint32(gcsWord(seed, r, 10))))
		c.u64("complex64 imaginary bits", uint64(math.Float32bits(imag(vc64))), uint64(gcsNaN32(gcsWord(seed, r, 11))))
		c.str("string", vstr, gcsString(seed, r, 12))
		c.ok("string data moved", unsafe.StringData(vstr) == vstrData)
		c.ok("slice is wrong", gcsSliceOK(vslice, seed, r, 13))
		c.ok("slice data moved", unsafe.SliceData(vslice) == vsliceData)
		for i, p := range vptrs {
			if p == nil {
				c.ok("array of pointers: nil element", false)
				continue
			}
			c.u64("array of pointers: element "+strconv.Itoa(i), *p, gcsWord(seed, r, 20+i))
		}
		c.ok("map is wrong", gcsMapOK(vmap, seed, r))
		if b, ok := vifPtr.(*gcsBox); !ok || !gcsBoxOK(b, seed, r, 30) {
			c.ok("interface holding a pointer is wrong", false)
		}
		if v, ok := vifInt.(uint64); !ok || v != gcsWord(seed, r, 31) {
			c.ok("interface holding a uint64 is wrong", false)
		}
		if v, ok := vifPair.(gcsPair); !ok || v != (gcsPair{gcsWord(seed, r, 32), gcsWord(seed, r, 33)}) {
			c.ok("interface holding a struct is wrong", false)
		}
		if v, ok := vifNaN.(float64); !ok || math.Float64bits(v) != gcsNaN64(gcsWord(seed, r, 34)) {
			c.ok("interface holding a NaN is wrong", false)
		}
		if v, ok := vifSmall.(uint8); !ok || v != uint8(gcsWord(seed, r, 35)) {
			c.ok("interface holding a uint8 is wrong", false)
		}
		if ge, ok := verr.(*gcsErr); !ok || ge.code != gcsWord(seed, r, 36) || ge.msg != gcsString(seed, r, 37) || verr.Error() != gcsString(seed, r, 37) {
			c.ok("error interface is wrong", false)
		}
		c.u64("mixed.a", vmix.a, gcsWord(seed, r, 40))
		c.ok("mixed.p is wrong", gcsBoxOK(vmix.p, seed, r, 41))
		c.u64("mixed.f bits", math.Float64bits(vmix.f), gcsNaN64(gcsWord(seed, r, 42)))
		c.str("mixed.s", vmix.s, gcsString(seed, r, 43))
		c.ok("mixed.q no longer points at the local", vmix.q == &local)
		c.ok("mixed.b changed", vmix.b == [3]byte{byte(gcsWord(seed, r, 44)), byte(gcsWord(seed, r, 45)), byte(gcsWord(seed, r, 46))})
		if b, ok := vmix.i.(*gcsBox); !ok || !gcsBoxOK(b, seed, r, 47) {
			c.ok("mixed.i is wrong", false)
		}
		c.str("mixed.sl", string(vmix.sl), gcsString(seed, r, 48))
		c.u64("mixed.c real bits", math.Float64bits(real(vmix.c)), gcsWord(seed, r, 49))
		c.u64("mixed.c imaginary bits", math.Float64bits(imag(vmix.c)), gcsNaN64(gcsWord(seed, r, 49)))
		c.u64("address-taken local", local, gcsWord(seed, r, 50))
		c.ok("pointer to the local moved", plocal == &local)
		c.u64("address-taken local through its pointer", *plocal, gcsWord(seed, r, 50))
		c.u64("local through mixed.q", *vmix.q, gcsWord(seed, r, 50))
		c.ok("pointer into the local array moved", parr == &arr[hot])
		c.u64("local array through the pointer", *parr, wantHot)
		for i := range arr {
			want := gcsWord(seed, -2, i)
			switch i {
			case hot:
				want = wantHot
			case cold:
				want = gcsWord(seed, r, 60) // written by the callee after the resume
			}
			c.u64("local array element "+strconv.Itoa(i), arr[i], want)
		}
		c.u64("stack closure before the yield", bumped, uint64(2*r+1)*step)
		c.u64("stack closure after the yield", gcsCallU64(bump), uint64(2*r+2)*step)
		c.u64("variable captured by the stack closure", counter, uint64(2*r+2)*step)
		c.u64("heap closure", hclo(), gcsHeapClosureWant(seed, r+1))
		c.ok("shared struct round", sh.round == r)
		c.u64("shared.after (written by the callee)", sh.after, gcsWord(seed, r, 55))
		c.ok("shared.arr no longer points at the local array", sh.arr == &arr)
		c.ok("shared.box is wrong", gcsBoxOK(sh.box, seed, r, 53))
		c.str("long-lived string", keepStr, gcsString(seed, -1, 0))
		c.ok("long-lived string data moved", unsafe.StringData(keepStr) == keepStrData)
		c.ok("long-lived box is wrong", gcsBoxOK(keepBox, seed, -1, 1))
		if p := gcCheck(seed, head, e.nodes); p != "" {
			c.ok("long-lived list: "+p, false)
		}
	}
	if e.final != nil {
		e.final()
	}
	e.finished.Store(true)
}

// gcsRunCatch calls c.Run on the calling goroutine, recording it as e's
// runner, and returns what Run panicked with, if anything.
func gcsRunCatch(c *continuation.Continuation, e *gcsEnv) (p any) {
	defer func() { p = recover() }()
	e.runner.Store(gcsGoid())
	c.Run()
	return nil
}

// gcsRun calls c.Run, on a fresh goroutine if fresh, and reports a panic
// out of Run. It must be called from the test's goroutine.
func gcsRun(t *testing.T, c *continuation.Continuation, e *gcsEnv, fresh bool) {
	t.Helper()
	var p any
	if fresh {
		done := make(chan struct{})
		go func() { defer close(done); p = gcsRunCatch(c, e) }()
		<-done
	} else {
		p = gcsRunCatch(c, e)
	}
	gcsPanicked(t, e, p)
}

// gcsPanicked fails the test if Run panicked with p.
func gcsPanicked(t *testing.T, e *gcsEnv, p any) {
	t.Helper()
	if p != nil {
		e.report(t)
		t.Fatalf("%s: Run panicked: %v", e.name, p)
	}
}

// gcsDrive runs c to completion, collecting garbage (with fresh garbage in
// between) before every resume, and calling Run on a fresh goroutine when
// fresh(i) says so for the i-th Run. It returns the number of Runs.
func gcsDrive(t *testing.T, c *continuation.Continuation, e *gcsEnv, fresh func(i int) bool) int {
	t.Helper()
	runs := 0
	for !c.IsDone() {
		if runs > 0 {
			runtime.GC()
			gcGarbage(100)
			runtime.GC()
		}
		gcsRun(t, c, e, fresh(runs))
		runs++
		if runs > 10*e.rounds+10 {
			t.Fatalf("%s: still not done after %d Runs", e.name, runs)
		}
	}
	return runs
}

// gcsCheckDone checks the continuation's end state and counters.
func gcsCheckDone(t *testing.T, c *continuation.Continuation, e *gcsEnv, runs, yields int) {
	t.Helper()
	e.report(t)
	if !c.IsDone() || !e.finished.Load() {
		t.Errorf("%s: IsDone %v, body finished %v; want both", e.name, c.IsDone(), e.finished.Load())
	}
	if got := e.resumes.Load(); got != int64(e.rounds) {
		t.Errorf("%s: the body was resumed %d times, want %d", e.name, got, e.rounds)
	}
	st := c.Stats()
	if st.Runs != uint64(runs) || st.Yields != uint64(yields) || st.Pinned != 0 {
		t.Errorf("%s: Stats %+v, want %d Runs, %d Yields, 0 Pinned", e.name, st, runs, yields)
	}
	if gcsStackCopy() && yields > 0 && (st.FramesFrozen < 2*st.Yields || st.FramesThawed < st.FramesFrozen || st.BytesThawed < st.BytesFrozen) {
		t.Errorf("%s: Stats %+v: the stack-copying backend froze or thawed too little", e.name, st)
	}
}

func gcsRounds(short, full int) int {
	if testing.Short() {
		return short
	}
	return full
}

// TestGCStressValueKinds: values of every kind, held only in the frames of
// a suspended continuation, survive collections between every yield and
// resume and right after every resume, bit for bit; a third of the Runs
// are on a fresh goroutine.
func TestGCStressValueKinds(t *testing.T) {
	s := scope.New("gcs values")
	e := &gcsEnv{name: "values", seed: 0x5eed0001, rounds: gcsRounds(40, 200), nodes: 64}
	e.runnerOf = e
	e.yield = func(int) {
		if !continuation.Yield(s) {
			e.fail("Yield returned false")
		}
	}
	c := continuation.New(s, func() { gcsValuesBody(e) })
	runs := gcsDrive(t, c, e, func(i int) bool { return i%3 == 2 })
	gcsCheckDone(t, c, e, runs, e.rounds)
	if runs != e.rounds+1 {
		t.Errorf("%d Runs, want %d", runs, e.rounds+1)
	}
}

// TestGCStressMigration: every Run is on a fresh goroutine, so the frames
// are thawed onto a different goroutine's stack every time, and pointers to
// the body's locals must point into the new stack.
func TestGCStressMigration(t *testing.T) {
	for _, seed := range []uint64{3, 0x5eed0002} {
		s := scope.New("gcs migration")
		e := &gcsEnv{name: "migration", seed: seed, rounds: gcsRounds(30, 150), nodes: 32}
		e.runnerOf = e
		var ids sync.Map // goroutines the body ran on
		e.yield = func(int) {
			if !continuation.Yield(s) {
				e.fail("Yield returned false")
			}
		}
		e.after = func(r int) {
			if _, dup := ids.LoadOrStore(gcsGoid(), r); dup && gcsStackCopy() {
				e.fail("round %d: resumed on a goroutine the body already ran on", r)
			}
		}
		c := continuation.New(s, func() { gcsValuesBody(e) })
		runs := gcsDrive(t, c, e, func(int) bool { return true })
		gcsCheckDone(t, c, e, runs, e.rounds)
	}
}

// gcsDeepYield recurses depth frames, each holding live locals (a scalar, a
// pointer to a heap word only it references, an address-taken local array),
// and yields at the bottom, so that the stack grows before the yield and
// the whole region is frozen. Right after the resume, at the bottom, it
// grows the stack further (recursion and a big frame) with the thawed
// frames above. Every frame checks its locals on the way up; it returns the
// number of frames that found one changed.
//
//go:noinline
func gcsDeepYield(e *gcsEnv, s *scope.Scope, depth, r int) int {
	mine := gcsWord(e.seed, r, 1000+depth)
	box := gcsNewWord(^mine)
	var pad [2]uint64
	pad[depth&1] = mine
	pp := &pad[depth&1]
	bad := 0
	if depth > 0 {
		bad = gcsDeepYield(e, s, depth-1, r)
	} else {
		if !continuation.Yield(s) {
			e.fail("round %d: Yield returned false", r)
		}
		runtime.GC()
		if b, _ := gcsRecurse(gcsRounds(3000, 10000), e.seed^uint64(r)); b != 0 {
			e.fail("round %d: recursion below the thawed frames: %d frames changed", r, b)
		}
		if b := gcsBigFrame(e.seed ^ uint64(r)); b != 0 {
			e.fail("round %d: big frame below the thawed frames: %d words changed", r, b)
		}
	}
	if mine != gcsWord(e.seed, r, 1000+depth) || *box != ^mine || *pp != mine || pp != &pad[depth&1] || pad[1-depth&1] != 0 {
		bad++
	}
	return bad
}

// gcsRecurse recurses depth frames, each with an address-taken local, and
// returns how many frames found theirs changed and the stack size at the
// bottom (0 if it cannot be read).
//
//go:noinline
func gcsRecurse(depth int, seed uint64) (bad int, size uintptr) {
	var pad [8]uint64
	pad[depth%8] = diffMix(seed, uint64(depth))
	p := &pad[depth%8]
	if depth > 0 {
		bad, size = gcsRecurse(depth-1, seed)
	} else if lo, hi, ok := gcsStack(); ok {
		size = hi - lo
	}
	if *p != diffMix(seed, uint64(depth)) || p != &pad[depth%8] {
		bad++
	}
	return bad, size
}

// gcsBigFrame has a 64 KiB local array: calling it grows the stack.
//
//go:noinline
func gcsBigFrame(seed uint64) int {
	var big [8 << 10]uint64
	for i := range big {
		big[i] = diffMix(seed, uint64(i))
	}
	bad := 0
	if b, _ := gcsRecurse(100, seed); b != 0 {
		bad += b
	}
	for i := range big {
		if big[i] != diffMix(seed, uint64(i)) {
			bad++
		}
	}
	return bad
}

// TestGCStressStackGrowth: the body yields at the bottom of 1,000 frames
// (the stack grew before the yield), and after every resume the stack grows
// again, at the bottom of those frames and in the body, by deep recursion
// and a big frame: the runtime copies the thawed frames and must find every
// pointer in them.
func TestGCStressStackGrowth(t *testing.T) {
	s := scope.New("gcs growth")
	e := &gcsEnv{name: "growth", seed: 0x5eed0003, rounds: gcsRounds(8, 40), nodes: 32}
	e.runnerOf = e
	e.yield = func(r int) {
		if bad := gcsDeepYield(e, s, 1000, r); bad != 0 {
			e.fail("round %d: %d of the 1,000 frames below the body found their locals changed", r, bad)
		}
	}
	e.after = func(r int) {
		b, size := gcsRecurse(gcsRounds(3000, 10000), e.seed+uint64(r))
		if b != 0 {
			e.fail("round %d: recursion after the resume: %d frames changed", r, b)
		}
		if size != 0 && size < 256<<10 {
			e.fail("round %d: the stack did not grow: %d bytes at the bottom of the recursion", r, size)
		}
		if b := gcsBigFrame(e.seed + uint64(r)); b != 0 {
			e.fail("round %d: big frame after the resume: %d words changed", r, b)
		}
		if p := gcDeepCheck(500, e.seed, gcBuild(e.seed, 8), 8); p != "" {
			e.fail("round %d: %s", r, p)
		}
	}
	c := continuation.New(s, func() { gcsValuesBody(e) })
	runs := gcsDrive(t, c, e, func(i int) bool { return i%2 == 1 })
	gcsCheckDone(t, c, e, runs, e.rounds)
	if st := c.Stats(); gcsStackCopy() && st.FramesFrozen < uint64(e.rounds)*1000 {
		t.Errorf("Stats %+v: want at least 1,000 frames frozen per yield", st)
	}
}

// TestGCStressStackShrink: after each resume the body grows its goroutine's
// stack, returns from the deep call and collects garbage twice, so that the
// runtime shrinks the stack holding the thawed frames; then it yields from
// the shrunk stack and is resumed, alternately on the same goroutine (whose
// stack was shrunk) and on a fresh one.
func TestGCStressStackShrink(t *testing.T) {
	s := scope.New("gcs shrink")
	e := &gcsEnv{name: "shrink", seed: 0x5eed0004, rounds: gcsRounds(10, 40), nodes: 32}
	e.runnerOf = e
	e.yield = func(int) {
		if !continuation.Yield(s) {
			e.fail("Yield returned false")
		}
	}
	var shrinks atomic.Int32
	e.after = func(r int) {
		b, grown := gcsRecurse(gcsRounds(5000, 10000), e.seed+uint64(r))
		if b != 0 {
			e.fail("round %d: recursion: %d frames changed", r, b)
		}
		runtime.GC()
		runtime.GC()
		if lo, hi, ok := gcsStack(); ok && hi-lo < grown {
			shrinks.Add(1)
		}
		if b := gcsBigFrame(e.seed - uint64(r)); b != 0 {
			e.fail("round %d: big frame after the shrink: %d words changed", r, b)
		}
		runtime.GC()
		runtime.GC()
	}
	c := continuation.New(s, func() { gcsValuesBody(e) })
	// Runs alternate: two on one long-lived goroutine, then one on a fresh
	// one.
	work, result := make(chan struct{}), make(chan any)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range work {
			result <- gcsRunCatch(c, e)
		}
	}()
	defer wg.Wait()
	defer close(work)
	runs := 0
	for !c.IsDone() {
		runtime.GC()
		if runs%3 == 2 {
			gcsRun(t, c, e, true)
		} else {
			work <- struct{}{}
			gcsPanicked(t, e, <-result)
		}
		runs++
		if runs > 2*e.rounds+2 {
			t.Fatalf("still not done after %d Runs", runs)
		}
	}
	gcsCheckDone(t, c, e, runs, e.rounds)
	t.Logf("%s: the stack was seen to shrink after %d of %d resumes", continuation.Backend(), shrinks.Load(), e.rounds)
	// Make sure the test did what it says: the runtime shrinks a stack
	// that uses less than a quarter of its size when it scans it, unless
	// told not to.
	if _, _, ok := gcsStack(); ok && shrinks.Load() == 0 && !strings.Contains(os.Getenv("GODEBUG"), "gcshrinkstackoff=1") {
		t.Errorf("the goroutine stack never shrank after the deep call returned")
	}
}

// TestGCStressManyConcurrent: many continuations yield and resume at once on
// thousands of worker goroutines (hundreds with -short), each Run by
// whichever worker picks it up, so that frames freeze on one goroutine and
// thaw on another all the time, while another goroutine collects garbage in
// a loop; every body checks its own values bit for bit.
func TestGCStressManyConcurrent(t *testing.T) {
	n, rounds := gcsRounds(300, 2000), gcsRounds(4, 8)
	type item struct {
		c *continuation.Continuation
		e *gcsEnv
	}
	items := make([]item, n)
	queue := make(chan item, n)
	for i := range items {
		s := scope.New("gcs concurrent " + strconv.Itoa(i))
		e := &gcsEnv{name: "concurrent " + strconv.Itoa(i), seed: uint64(i) * 0x9e3779b9, rounds: rounds, nodes: 4 + i%5, noGC: true}
		e.runnerOf = e
		e.yield = func(r int) {
			if r%2 == 1 {
				runtime.Gosched()
			}
			if !continuation.Yield(s) {
				e.fail("Yield returned false")
			}
		}
		items[i] = item{continuation.New(s, func() { gcsValuesBody(e) }), e}
		queue <- items[i]
	}

	stop := make(chan struct{})
	var gcs atomic.Int64
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				gcGarbage(20)
				gcs.Add(1)
			}
		}
	}()

	var left atomic.Int64
	left.Store(int64(n))
	var runs atomic.Int64
	var panics sync.Map
	var wg sync.WaitGroup
	for range gcsRounds(200, 2000) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range queue {
				func() {
					defer func() {
						if p := recover(); p != nil {
							panics.Store(it.e.name, fmt.Sprint(p))
							if left.Add(-1) == 0 {
								close(queue)
							}
						}
					}()
					it.e.runner.Store(gcsGoid())
					it.c.Run()
					runs.Add(1)
					if !it.c.IsDone() {
						queue <- it
					} else if left.Add(-1) == 0 {
						close(queue)
					}
				}()
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()

	panics.Range(func(k, v any) bool {
		t.Errorf("%v: Run panicked: %v", k, v)
		return true
	})
	for _, it := range items {
		gcsCheckDone(t, it.c, it.e, rounds+1, rounds)
	}
	if got, want := runs.Load(), int64(n*(rounds+1)); got != want {
		t.Errorf("%d Runs in all, want %d", got, want)
	}
	t.Logf("%d continuations, %d Runs, %d collections meanwhile", n, runs.Load(), gcs.Load())
}

// gcsTracked is an object whose collection a cleanup reports.
type gcsTracked struct {
	words [8]uint64
	self  *gcsTracked
	data  []uint64
}

// gcsLarge is a large object (its own span) whose collection a cleanup
// reports.
type gcsLarge struct {
	words [8 << 10]uint64
	p     *uint64
}

// gcsCleanupRounds is the number of yields of each body of
// TestGCStressCleanupWhileSuspended, and gcsObjects the number of tracked
// objects per body: five held by the body for its whole run (0 to 4), and
// one per round held by the callee that yields (5+r).
const (
	gcsCleanupRounds = 4
	gcsObjects       = 5 + gcsCleanupRounds
)

// gcsCleanupEnv is what the bodies of TestGCStressCleanupWhileSuspended
// share with the test: per-object collected flags, per-body counters, and
// failures (recorded, not reported with t, since deferred calls of dropped
// bodies may run late).
type gcsCleanupEnv struct {
	seed      uint64
	collected []atomic.Bool  // [body*gcsObjects+k]
	round     []atomic.Int32 // per body: the round it is in
	resumes   []atomic.Int32 // per body
	deferred  []atomic.Int32 // per body
	handles   []atomic.Bool  // per body: its Continuation was collected
	errs      gcsEnv         // failures only
}

func (ce *gcsCleanupEnv) w(i, k, j int) uint64 { return gcsWord(ce.seed+uint64(i), k, j) }

//go:noinline
func (ce *gcsCleanupEnv) newTracked(i, k int) *gcsTracked {
	o := &gcsTracked{data: make([]uint64, 3+k)}
	o.self = o
	for j := range o.words {
		o.words[j] = ce.w(i, k, j)
	}
	for j := range o.data {
		o.data[j] = ce.w(i, k, 100+j)
	}
	runtime.AddCleanup(o, func(b *atomic.Bool) { b.Store(true) }, &ce.collected[i*gcsObjects+k])
	return o
}

func (ce *gcsCleanupEnv) trackedOK(o *gcsTracked, i, k int) bool {
	if o == nil || o.self != o || len(o.data) != 3+k {
		return false
	}
	for j, v := range o.words {
		if v != ce.w(i, k, j) {
			return false
		}
	}
	for j, v := range o.data {
		if v != ce.w(i, k, 100+j) {
			return false
		}
	}
	return true
}

//go:noinline
func (ce *gcsCleanupEnv) newLarge(i int) *gcsLarge {
	o := &gcsLarge{p: gcsNewWord(ce.w(i, 1, -1))}
	for j := range o.words {
		o.words[j] = diffMix(ce.w(i, 1, -2), uint64(j))
	}
	runtime.AddCleanup(o, func(b *atomic.Bool) { b.Store(true) }, &ce.collected[i*gcsObjects+1])
	return o
}

func (ce *gcsCleanupEnv) largeOK(o *gcsLarge, i int) bool {
	if o == nil || o.p == nil || *o.p != ce.w(i, 1, -1) {
		return false
	}
	for j, v := range o.words {
		if v != diffMix(ce.w(i, 1, -2), uint64(j)) {
			return false
		}
	}
	return true
}

// anyCollected returns the first object of body i still held in round r
// (objects 0 to 4, and 5+r if r >= 0) whose cleanup ran, or -1.
func (ce *gcsCleanupEnv) anyCollected(i, r int) int {
	for k := range 5 {
		if ce.collected[i*gcsObjects+k].Load() {
			return k
		}
	}
	if r >= 0 && ce.collected[i*gcsObjects+5+r].Load() {
		return 5 + r
	}
	return -1
}

// gcsHolder is a local struct of gcsCleanupBody whose address is passed
// to the callee that yields; it holds the only reference to object 4.
type gcsHolder struct {
	n   uint64
	obj *gcsTracked
}

// gcsCleanupYield yields while holding object 5+r only in its own frame.
//
//go:noinline
func gcsCleanupYield(ce *gcsCleanupEnv, s *scope.Scope, h *gcsHolder, i, r int) {
	o := ce.newTracked(i, 5+r)
	ce.round[i].Store(int32(r))
	if !continuation.Yield(s) {
		ce.errs.fail("body %d round %d: Yield returned false", i, r)
	}
	runtime.GC()
	if k := ce.anyCollected(i, r); k >= 0 {
		ce.errs.fail("body %d round %d: object %d was collected while its continuation was suspended", i, r, k)
	}
	if !ce.trackedOK(o, i, 5+r) || !ce.trackedOK(h.obj, i, 4) || h.n != ce.w(i, 4, -1) {
		ce.errs.fail("body %d round %d: an object held by the callee's frame changed", i, r)
	}
}

// gcsCleanupBody allocates objects referenced only from its frames (a
// plain pointer local, a large object, an interface, an array of
// pointers, a local struct passed down, and a callee's local), yields
// e.rounds times, and checks after each resume that none was collected and
// that their contents are intact. Its deferred call, which runs when it
// finishes or, dropped while suspended, when it is unwound, checks the
// objects once more.
//
//go:noinline
func gcsCleanupBody(ce *gcsCleanupEnv, s *scope.Scope, i int) {
	o0 := ce.newTracked(i, 0)
	o1 := ce.newLarge(i)
	var o2 any = ce.newTracked(i, 2)
	var o3 [2]*gcsTracked
	o3[i%2] = ce.newTracked(i, 3)
	h := gcsHolder{n: ce.w(i, 4, -1), obj: ce.newTracked(i, 4)}
	check := func(when string) {
		if k := ce.anyCollected(i, -1); k >= 0 {
			ce.errs.fail("body %d %s: object %d was collected while the body still held it", i, when, k)
		}
		o2t, _ := o2.(*gcsTracked)
		if !ce.trackedOK(o0, i, 0) || !ce.largeOK(o1, i) || !ce.trackedOK(o2t, i, 2) || !ce.trackedOK(o3[i%2], i, 3) || o3[1-i%2] != nil || !ce.trackedOK(h.obj, i, 4) {
			ce.errs.fail("body %d %s: an object held only by the body's frames changed", i, when)
		}
	}
	defer func() {
		check("in its deferred call")
		ce.deferred[i].Add(1)
	}()
	for r := range gcsCleanupRounds {
		gcsCleanupYield(ce, s, &h, i, r)
		runtime.GC()
		ce.resumes[i].Add(1)
		check("after resume " + strconv.Itoa(r))
	}
}

// TestGCStressCleanupWhileSuspended: objects referenced only from the
// frames of suspended continuations are not collected however often the
// collector runs (their cleanups do not run) and are intact when resumed;
// they are collected once their continuation finishes or, suspended, is
// dropped (then its deferred call runs once, with the objects intact, as
// the frames are unwound).
func TestGCStressCleanupWhileSuspended(t *testing.T) {
	base := leakStart(".gcsCleanupBody(")
	n := gcsRounds(8, 32)
	ce := &gcsCleanupEnv{
		seed:      0x5eed0005,
		collected: make([]atomic.Bool, n*gcsObjects),
		round:     make([]atomic.Int32, n),
		resumes:   make([]atomic.Int32, n),
		deferred:  make([]atomic.Int32, n),
		handles:   make([]atomic.Bool, n),
	}
	ce.errs.name = "cleanup"
	flush := func(when string) {
		t.Helper()
		for range 3 {
			gcGarbage(200)
			gcFlushCleanups(t)
		}
		for i := range n {
			if k := ce.anyCollected(i, int(ce.round[i].Load())); k >= 0 && ce.deferred[i].Load() == 0 {
				t.Fatalf("%s: object %d of suspended body %d was collected", when, k, i)
			}
			if ce.handles[i].Load() {
				t.Fatalf("%s: the continuation of body %d was collected while still referenced", when, i)
			}
		}
	}
	func() {
		cs := make([]*continuation.Continuation, n)
		for i := range cs {
			s := scope.New("gcs cleanup " + strconv.Itoa(i))
			cs[i] = continuation.New(s, func() { gcsCleanupBody(ce, s, i) })
			runtime.AddCleanup(cs[i], func(b *atomic.Bool) { b.Store(true) }, &ce.handles[i])
			gcsRun(t, cs[i], &ce.errs, i%2 == 1) // suspended in round 0
		}
		flush("after the first yield")
		for cycle := range 2 {
			for i, c := range cs {
				gcsRun(t, c, &ce.errs, (i+cycle)%2 == 1)
				if c.IsDone() {
					t.Fatalf("body %d finished early", i)
				}
			}
			flush(fmt.Sprintf("after resume %d", cycle+1))
		}
		// Even bodies run to completion; odd ones are dropped suspended.
		for i := 0; i < n; i += 2 {
			for !cs[i].IsDone() {
				gcsRun(t, cs[i], &ce.errs, false)
			}
			if d := ce.deferred[i].Load(); d != 1 {
				t.Fatalf("body %d finished, but its deferred call ran %d times", i, d)
			}
		}
		for i := range n {
			if ce.deferred[i].Load() != int32(1-i%2) {
				t.Fatalf("body %d: deferred call ran %d times before any was dropped", i, ce.deferred[i].Load())
			}
		}
	}()
	base.wait(t, "continuations finished or dropped", func() string {
		for i := range n {
			if !ce.handles[i].Load() {
				return fmt.Sprintf("the continuation of body %d was not collected", i)
			}
			if d := ce.deferred[i].Load(); d != 1 {
				return fmt.Sprintf("the deferred call of body %d ran %d times, want 1", i, d)
			}
			// Objects 0 to 4, and one per round the body entered.
			for k := range 6 + int(ce.round[i].Load()) {
				if !ce.collected[i*gcsObjects+k].Load() {
					return fmt.Sprintf("object %d of body %d was not collected", k, i)
				}
			}
		}
		return ""
	})
	for i := range n {
		want := int32(gcsCleanupRounds)
		if i%2 == 1 {
			want = 2 // resumed twice, then dropped
		}
		if got := ce.resumes[i].Load(); got != want {
			t.Errorf("body %d was resumed %d times, want %d", i, got, want)
		}
	}
	ce.errs.report(t)
}

// TestGCStressNested: an inner continuation yields to the outer scope (so
// both are suspended together) and to its own, alternately; the outer body
// runs it in one round and yields itself in the next. Garbage is collected
// between every yield and resume, the outer continuation is resumed on a
// fresh goroutine every other time, and both bodies check their values
// after every resume.
func TestGCStressNested(t *testing.T) {
	for _, seed := range []uint64{0x5eed0006, 7} {
		outerS, innerS := scope.New("gcs outer"), scope.New("gcs inner")
		rounds := gcsRounds(12, 60) // even
		oe := &gcsEnv{name: "outer", seed: seed, rounds: rounds, nodes: 32}
		ie := &gcsEnv{name: "inner", seed: seed + 1, rounds: rounds, nodes: 32}
		oe.runnerOf, ie.runnerOf = oe, oe
		inner := continuation.New(innerS, func() { gcsValuesBody(ie) })
		oe.yield = func(r int) {
			if r%2 == 0 {
				inner.Run() // the inner body yields to outerS, then to innerS
				if inner.IsDone() {
					oe.fail("round %d: the inner continuation finished early", r)
				}
			} else if !continuation.Yield(outerS) {
				oe.fail("round %d: Yield returned false", r)
			}
		}
		oe.final = func() {
			inner.Run() // the inner body's last round
			if !inner.IsDone() || !ie.finished.Load() {
				oe.fail("the inner continuation did not finish")
			}
		}
		ie.yield = func(r int) {
			s := innerS
			if r%2 == 0 {
				s = outerS
			}
			if !continuation.Yield(s) {
				ie.fail("round %d: Yield returned false", r)
			}
		}
		outer := continuation.New(outerS, func() { gcsValuesBody(oe) })
		runs := gcsDrive(t, outer, oe, func(i int) bool { return i%2 == 1 })
		gcsCheckDone(t, outer, oe, rounds+1, rounds)
		gcsCheckDone(t, inner, ie, rounds/2+1, rounds)
		if runs != rounds+1 {
			t.Errorf("outer: %d Runs, want %d", runs, rounds+1)
		}
	}
}

// gcsLink is a local struct of gcsArrCaller pointing at its local array.
type gcsLink struct {
	p    *[4]int
	q    *int
	heap *gcsBox
	n    uint64
}

// gcsArrCaller holds a local array and a local struct pointing into it, and
// passes pointers to both down to callees that yield: the array's frame is
// frozen with the frames holding pointers to it.
//
//go:noinline
func gcsArrCaller(e *gcsEnv, s *scope.Scope, r int) {
	seed := e.seed
	var arr [4]int
	for i := range arr {
		arr[i] = int(gcsWord(seed, r, 300+i))
	}
	link := gcsLink{p: &arr, q: &arr[2], heap: gcsNewBox(seed, r, 310), n: gcsWord(seed, r, 311)}
	gcsArrMid(e, s, &arr, &link, r)
	c := gcsChecker{e: e, r: r}
	for i := range arr {
		c.u64("caller: array element "+strconv.Itoa(i)+" written by the callee", uint64(arr[i]), gcsWord(seed, r, 320+i))
	}
	c.ok("caller: link.p no longer points at the array", link.p == &arr)
	c.ok("caller: link.q no longer points into the array", link.q == &arr[2])
	c.ok("caller: link.heap is wrong", gcsBoxOK(link.heap, seed, r, 310))
	c.u64("caller: link.n", link.n, gcsWord(seed, r, 311)+1)
}

//go:noinline
func gcsArrMid(e *gcsEnv, s *scope.Scope, p *[4]int, l *gcsLink, r int) {
	mine := gcsWord(e.seed, r, 330)
	gcsArrLeaf(e, s, p, &p[1], l, r)
	c := gcsChecker{e: e, r: r}
	c.u64("middle frame: its local", mine, gcsWord(e.seed, r, 330))
	c.ok("middle frame: p is off the stack", gcsOnStack(unsafe.Pointer(p)))
	c.ok("middle frame: link.p differs from p", l.p == p)
}

// gcsArrLeaf yields twice while holding p (the caller's caller's local
// array), q (a pointer into it) and l (a local struct pointing at it), and
// checks and writes them after each resume, after growing the stack.
//
//go:noinline
func gcsArrLeaf(e *gcsEnv, s *scope.Scope, p *[4]int, q *int, l *gcsLink, r int) {
	seed := e.seed
	c := gcsChecker{e: e, r: r}
	check := func(when string, base int) {
		for i := range p {
			c.u64(when+": array element "+strconv.Itoa(i), uint64(p[i]), gcsWord(seed, r, base+i))
		}
		c.ok(when+": q no longer points at p[1]", q == &p[1])
		c.u64(when+": *q", uint64(*q), gcsWord(seed, r, base+1))
		c.ok(when+": link.p no longer equals p", l.p == p)
		c.ok(when+": link.q no longer points at p[2]", l.q == &p[2])
		c.ok(when+": link.heap is wrong", gcsBoxOK(l.heap, seed, r, 310))
		c.ok(when+": p is not on the current goroutine's stack", gcsOnStack(unsafe.Pointer(p)))
	}
	check("before the first yield", 300)
	if !continuation.Yield(s) {
		e.fail("round %d: Yield returned false", r)
	}
	runtime.GC()
	e.resumes.Add(1)
	c.runner()
	check("after the first resume", 300)
	if b, _ := gcsRecurse(2000, seed+uint64(r)); b != 0 {
		e.fail("round %d: recursion: %d frames changed", r, b)
	}
	check("after growing the stack", 300)
	for i := range p {
		p[i] = int(gcsWord(seed, r, 320+i))
	}
	l.n++
	if !continuation.Yield(s) {
		e.fail("round %d: Yield returned false", r)
	}
	runtime.GC()
	e.resumes.Add(1)
	c.runner()
	check("after the second resume", 320)
	if b := gcsBigFrame(seed ^ uint64(r)); b != 0 {
		e.fail("round %d: big frame: %d words changed", r, b)
	}
	check("after the big frame", 320)
}

// TestGCStressCalleeHoldsStackPointer: a callee yields while holding
// pointers to a local array of a frame above it (and into the array, and to
// a local struct pointing at it), all frozen together; the frames are
// thawed, half the time onto a fresh goroutine, and the stack grows with
// them in place.
func TestGCStressCalleeHoldsStackPointer(t *testing.T) {
	s := scope.New("gcs stack pointers")
	rounds := gcsRounds(15, 60)
	e := &gcsEnv{name: "stack pointers", seed: 0x5eed0007, rounds: 2 * rounds}
	e.runnerOf = e
	c := continuation.New(s, func() {
		for r := range rounds {
			gcsArrCaller(e, s, r)
		}
		e.finished.Store(true)
	})
	runs := gcsDrive(t, c, e, func(i int) bool { return i%2 == 1 })
	gcsCheckDone(t, c, e, runs, 2*rounds)
	if runs != 2*rounds+1 {
		t.Errorf("%d Runs, want %d", runs, 2*rounds+1)
	}
}

// gcsUnwind is one frame of TestGCStressUnwindAcrossBarrier: it keeps heap
// values and a pointer to its own local live across the yields below it,
// and checks them in a deferred call, which runs when a panic or a Goexit
// unwinds the frame, thawed lazily from the chunk by the barrier. The
// deferred calls collect garbage and grow the stack (gcDeepCheck) while the
// engine's nested hosts are on it. Level repanicAt's deferred call panics,
// level recoverAt's recovers.
//
//go:noinline
func gcsUnwind(e *gcsEnv, sc *scope.Scope, seed uint64, d, recoverAt, repanicAt int, goexit bool, log *[]string) {
	str := gcsString(seed, d, 1)
	box := gcsNewBox(seed, d, 2)
	local := gcsWord(seed, d, 3)
	p := &local
	head := gcBuild(seed+uint64(d), 8)
	defer func() {
		runtime.GC()
		if bad := gcDeepCheck(40+d%8, seed+uint64(d), head, 8); bad != "" {
			e.fail("level %d, unwinding: %s", d, bad)
		}
		if str != gcsString(seed, d, 1) || !gcsBoxOK(box, seed, d, 2) || *p != gcsWord(seed, d, 3) {
			e.fail("level %d: a value kept by a frame unwound across the barrier changed", d)
		}
		*log = append(*log, fmt.Sprint("defer ", d))
	}()
	if d == repanicAt {
		defer func() { panic(fmt.Sprint("again at ", d)) }()
	}
	if d == recoverAt {
		defer func() {
			*log = append(*log, fmt.Sprint("recovered ", recover(), " at ", d))
		}()
	}
	if d == 0 {
		for i := range 3 {
			if sc != nil { // nil: the plain run
				continuation.Yield(sc)
			}
			gcGarbage(200 + i)
		}
		if goexit {
			runtime.Goexit()
		}
		panic("bottom")
	}
	gcsUnwind(e, sc, seed, d-1, recoverAt, repanicAt, goexit, log)
	*log = append(*log, fmt.Sprint("return ", d))
}

// Panics and runtime.Goexit that unwind frozen frames with deferred calls
// pending, on the stack-copying backend by raising them again in thawed
// frames from nested hosts (crossing, frozenPanic, frozenGoexit,
// frozenGoexitPanic), under garbage collection, stack growth in the
// deferred calls, and resumption on fresh goroutines. The log must be the
// same as the plain run's.
func TestGCStressUnwindAcrossBarrier(t *testing.T) {
	const depth = 30
	type tc struct {
		name                 string
		recoverAt, repanicAt int
		goexit               bool
	}
	cases := []tc{
		{"panic", -1, -1, false},
		{"panic-recover", 20, -1, false},
		{"repanic-recover", 25, 10, false},
		{"goexit", -1, -1, true},
		{"goexit-repanic", -1, 10, true},
		{"goexit-repanic-recover", 25, 10, true},
		{"goexit-repanic-twice-recover", 28, 0, true},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			run := func(inCont bool) ([]string, any) {
				var sc *scope.Scope // nil: the plain run, which does not yield
				if inCont {
					sc = scope.New("gcs-unwind")
				}
				e := &gcsEnv{name: k.name}
				var log []string
				var panicked any
				seed := uint64(len(k.name))
				body := func() { gcsUnwind(e, sc, seed, depth, k.recoverAt, k.repanicAt, k.goexit, &log) }
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer func() { panicked = recover() }()
					if !inCont {
						body()
						return
					}
					c := continuation.New(sc, body)
					for !c.IsDone() {
						runtime.GC()
						diffRunElsewhere(c)
					}
				}()
				<-done
				e.report(t)
				return log, panicked
			}
			wantLog, wantPanic := run(false)
			gotLog, gotPanic := run(true)
			if !slices.Equal(gotLog, wantLog) {
				t.Errorf("log in a continuation:\n%s\nplain:\n%s", strings.Join(gotLog, "\n"), strings.Join(wantLog, "\n"))
			}
			if fmt.Sprint(gotPanic) != fmt.Sprint(wantPanic) {
				t.Errorf("a continuation panicked with %v; plain: %v", gotPanic, wantPanic)
			}
		})
	}
}
