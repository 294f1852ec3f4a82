package continuation_test

import (
	"fmt"
	"iter"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// Freeze and thaw of every kind of frame: each test yields from a kind of
// frame, or with a kind of value in its frames, that the stack-copying
// backend must move intact or pin. It resumes on other goroutines (fresh
// ones with small stacks, ones that first grew their stacks, and the
// test's own after collections shrank it), collects garbage between every
// yield and resume and right after every resume, grows the stack below the
// thawed frames, and checks every value bit for bit. The helpers are
// prefixed fr; gcs* and gc* helpers of the other files are reused. Run
// them also with GOGC=1 GODEBUG=invalidptr=1,gccheckmark=1,clobberfree=1,
// WEFT_THAW=eager and WEFT_BACKEND=portable.

// frEnv is one test body's context: its scope, the seed of its values,
// and the failures it reports.
type frEnv struct {
	t      *testing.T
	s      *scope.Scope
	seed   uint64
	yields atomic.Int64
	pinned []pinning.Reason
	stats  continuation.Stats // the continuation's, once done

	mu   sync.Mutex
	errs []string
}

func (e *frEnv) fail(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) < 12 {
		e.errs = append(e.errs, fmt.Sprintf(format, args...))
	}
}

// check records a failure unless cond holds.
//
//go:noinline
func (e *frEnv) check(cond bool, format string, args ...any) {
	if !cond {
		e.fail(format, args...)
	}
}

// w is the value of slot k of round r.
func (e *frEnv) w(r, k int) uint64 { return gcsWord(e.seed, r, k) }

// y suspends the body, then, once resumed, collects garbage and grows the
// stack below the frames that were just thawed.
//
//go:noinline
func (e *frEnv) y() {
	if !continuation.Yield(e.s) {
		e.fail("Yield returned false (pinned)")
	}
	e.yields.Add(1)
	runtime.GC()
	if b, _ := gcsRecurse(200, e.seed); b != 0 {
		e.fail("recursion below the thawed frames: %d frames changed", b)
	}
	gcGarbage(10)
}

// frGrowAndRun grows the calling goroutine's stack by depth frames of about
// 1 KiB, then calls run at the bottom.
//
//go:noinline
func frGrowAndRun(depth int, run func()) int {
	var pad [128]uint64
	pad[depth%128] = uint64(depth)
	if depth > 0 {
		frGrowAndRun(depth-1, run)
	} else {
		run()
	}
	return int(pad[depth%128])
}

// frRunCatch runs c, returning what it panicked with.
func frRunCatch(c *continuation.Continuation) (p any) {
	defer func() { p = recover() }()
	c.Run()
	return nil
}

// frDrive runs body in a continuation to completion. Each Run is on a
// different kind of runner: a fresh goroutine; a fresh goroutine at the
// bottom of a deep recursion; the test's goroutine after collections shrank
// its stack; a fresh goroutine while another collects garbage in a loop. It
// fails the test on a wrong value the body reports, and returns e, which
// holds the reasons of any pins (frNoPins checks them) and the final Stats.
func frDrive(t *testing.T, seed uint64, body func(e *frEnv)) *frEnv {
	t.Helper()
	e := &frEnv{t: t, s: scope.New(t.Name()), seed: seed}
	c := continuation.New(e.s, func() { body(e) }, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
		e.pinned = append(e.pinned, r)
	}))
	var p any
	for i := 0; !c.IsDone(); i++ {
		if i > 10000 {
			t.Fatal("not done after 10,000 Runs")
		}
		runtime.GC()
		gcGarbage(20)
		switch i % 4 {
		case 0:
			done := make(chan struct{})
			go func() { defer close(done); p = frRunCatch(c) }()
			<-done
		case 1:
			done := make(chan struct{})
			go func() { defer close(done); frGrowAndRun(300+i%7, func() { p = frRunCatch(c) }) }()
			<-done
		case 2:
			runtime.GC()
			runtime.GC() // shrinks the test goroutine's stack
			p = frRunCatch(c)
		case 3:
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					runtime.GC()
					gcGarbage(5)
				}
			}()
			done := make(chan struct{})
			go func() { defer close(done); p = frRunCatch(c) }()
			<-done
			close(stop)
			wg.Wait()
		}
		if p != nil {
			t.Fatalf("Run panicked: %v", p)
		}
	}
	e.stats = c.Stats()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) > 0 {
		t.Errorf("%d failures, first:\n\t%s", len(e.errs), strings.Join(e.errs, "\n\t"))
	}
	if e.yields.Load() == 0 {
		t.Errorf("the body never yielded")
	}
	return e
}

// frNoPins fails the test if a yield of e pinned (on the stack-copying
// backend; the portable backend pins none of these).
func frNoPins(t *testing.T, e *frEnv) {
	t.Helper()
	if len(e.pinned) != 0 {
		t.Errorf("%s: yields pinned: %v", continuation.Backend(), e.pinned)
	}
}

// ---- Method values, method wrappers, interface calls ----

type frRecv struct {
	a   uint64
	box *gcsBox
	arr [3]*uint64
	s   string
}

func frNewRecv(e *frEnv, r int) frRecv {
	return frRecv{a: e.w(r, 1), box: gcsNewBox(e.seed, r, 2), arr: [3]*uint64{gcsNewWord(e.w(r, 3)), gcsNewWord(e.w(r, 4)), gcsNewWord(e.w(r, 5))}, s: gcsString(e.seed, r, 6)}
}

func (x *frRecv) ok(e *frEnv, r int, what string) {
	e.check(x.a == e.w(r, 1), "%s round %d: a", what, r)
	e.check(gcsBoxOK(x.box, e.seed, r, 2), "%s round %d: box", what, r)
	for i, p := range x.arr {
		e.check(p != nil && *p == e.w(r, 3+i), "%s round %d: arr[%d]", what, r, i)
	}
	e.check(x.s == gcsString(e.seed, r, 6), "%s round %d: s", what, r)
}

// ValYield has a value receiver: a method value of it copies the receiver
// into its closure, and calling it through a pointer goes through an
// autogenerated wrapper.
//
//go:noinline
func (x frRecv) ValYield(e *frEnv, r int) uint64 {
	p := &x.arr[r%3] // a pointer into the receiver, which is on the stack
	e.y()
	x.ok(e, r, "value receiver")
	e.check(p == &x.arr[r%3] && gcsOnStack(unsafe.Pointer(p)), "value receiver round %d: pointer into it moved", r)
	return x.a ^ **p
}

//go:noinline
func (x *frRecv) PtrYield(e *frEnv, r int) uint64 {
	e.y()
	x.ok(e, r, "pointer receiver")
	x.a ^= 1
	return x.a
}

type frOuter struct {
	pad uint64
	frRecv
	tail *uint64
}

type frYielder interface {
	ValYield(e *frEnv, r int) uint64
}

type frPtrYielder interface {
	PtrYield(e *frEnv, r int) uint64
}

// frCallMV calls a method value it is passed; f does not escape, so its
// closure stays on the caller's stack.
//
//go:noinline
func frCallMV(f func(*frEnv, int) uint64, e *frEnv, r int) uint64 { return f(e, r) }

var frSinkYielder frYielder

func TestFramesMethodValues(t *testing.T) {
	const rounds = 12
	e := frDrive(t, 0xaf01, func(e *frEnv) {
		for r := range rounds {
			local := frNewRecv(e, r)
			// A method value with a value receiver, called directly and
			// through a function that takes it as a func value (the -fm
			// wrapper's frame is in the region).
			mv := local.ValYield
			got := frCallMV(mv, e, r)
			e.check(got == e.w(r, 1)^e.w(r, 3+r%3), "method value: got %#x", got)
			// A method value with a pointer receiver on a stack local.
			pv := local.PtrYield
			got = frCallMV(pv, e, r)
			e.check(got == e.w(r, 1)^1 && local.a == got, "pointer method value: got %#x, local.a %#x", got, local.a)
			local.a ^= 1
			local.ok(e, r, "local after pointer method value")
			// A method expression, and the autogenerated (*T).M wrapper of
			// a value method, promoted through an embedded field.
			out := frOuter{pad: e.w(r, 7), frRecv: frNewRecv(e, r), tail: gcsNewWord(e.w(r, 8))}
			got = (*frOuter).ValYield(&out, e, r)
			e.check(got == e.w(r, 1)^e.w(r, 3+r%3), "method expression of a promoted method: got %#x", got)
			got = frCallMV(out.ValYield, e, r)
			e.check(got == e.w(r, 1)^e.w(r, 3+r%3), "promoted method value: got %#x", got)
			e.check(out.pad == e.w(r, 7) && *out.tail == e.w(r, 8), "outer round %d: fields", r)
			out.frRecv.ok(e, r, "outer.frRecv")
			// Interface calls through itabs: a value (boxed) and a pointer.
			var iv frYielder = frNewRecv(e, r)
			got = iv.ValYield(e, r)
			e.check(got == e.w(r, 1)^e.w(r, 3+r%3), "interface value call: got %#x", got)
			hp := &frOuter{frRecv: frNewRecv(e, r)}
			var ip frPtrYielder = hp // (*frOuter).PtrYield: a promoted-method wrapper
			got = ip.PtrYield(e, r)
			e.check(got == e.w(r, 1)^1, "interface pointer call: got %#x", got)
			frSinkYielder = iv
		}
	})
	frNoPins(t, e)
}

// ---- Closures ----

//go:noinline
func frCallU64(f func() uint64) uint64 { return f() }

//go:noinline
func frCallDeep(depth int, f func() uint64) uint64 {
	var pad [4]uint64
	pad[depth%4] = uint64(depth) + 1
	v := uint64(0)
	if depth > 0 {
		v = frCallDeep(depth-1, f)
	} else {
		v = f()
	}
	if pad[depth%4] != uint64(depth)+1 {
		return 0xbad
	}
	return v
}

func TestFramesClosures(t *testing.T) {
	const rounds = 12
	e := frDrive(t, 0xaf02, func(e *frEnv) {
		var acc [5]uint64 // captured by reference by every closure below
		box := gcsNewBox(e.seed, -1, 0)
		name := gcsString(e.seed, -1, 1)
		want := [5]uint64{}
		for r := range rounds {
			k := r % 5
			add := func(v uint64) { acc[k] += v } // captures k by value, acc by reference
			outer := func(depth int) uint64 {
				q := &acc[(k+1)%5]
				inner := func() uint64 {
					add(e.w(r, 1))
					*q ^= e.w(r, 2)
					e.y()
					e.check(gcsBoxOK(box, e.seed, -1, 0), "closure round %d: captured box", r)
					e.check(name == gcsString(e.seed, -1, 1), "closure round %d: captured string", r)
					e.check(q == &acc[(k+1)%5] && gcsOnStack(unsafe.Pointer(q)), "closure round %d: pointer into the body's array moved", r)
					return acc[k] ^ *q
				}
				return frCallDeep(depth, inner)
			}
			got := outer(r * 3)
			want[k] += e.w(r, 1)
			want[(k+1)%5] ^= e.w(r, 2)
			e.check(acc == want, "closure round %d: acc %x, want %x", r, acc, want)
			e.check(got == want[k]^want[(k+1)%5], "closure round %d: result %#x", r, got)
		}
	})
	frNoPins(t, e)
}

// ---- Generics ----

type frGenStack[T any] struct {
	items []T
	top   *T
	local [4]T
}

//go:noinline
func (s *frGenStack[T]) pushYield(e *frEnv, v T, depth int) T {
	s.local[depth%4] = v
	s.top = &s.local[depth%4]
	if depth > 0 {
		return s.pushYield(e, v, depth-1)
	}
	e.y()
	return *s.top
}

//go:noinline
func frGenKeep[T any, P interface {
	*T
	Sum() uint64
}](e *frEnv, vals []T, depth int) uint64 {
	var arr [3]T // a local array of the type parameter's type
	copy(arr[:], vals)
	p := P(&arr[depth%3])
	if depth > 0 {
		return frGenKeep[T, P](e, vals, depth-1) ^ p.Sum()
	}
	var st frGenStack[T]
	got := st.pushYield(e, vals[0], 3)
	_ = got
	return P(&arr[0]).Sum() ^ p.Sum() ^ P(&got).Sum()
}

type frGenVal struct {
	p *uint64
	s string
	n uint64
}

func (v *frGenVal) Sum() uint64 {
	if v.p == nil {
		return 0xdead
	}
	return *v.p ^ v.n ^ diffStrHash(v.s)
}

type frGenPtr [2]*gcsBox

func (v *frGenPtr) Sum() uint64 {
	if v[0] == nil || v[1] == nil {
		return 0xdead
	}
	return v[0].tag ^ v[1].tag*3
}

type frNum interface{ ~uint64 | ~int64 }

//go:noinline
func frGenSum[S ~[]E, E frNum](e *frEnv, s S) E {
	var t E
	for i, v := range s {
		if i == len(s)/2 {
			e.y()
		}
		t += v
	}
	return t
}

func frGenWant[T any, P interface {
	*T
	Sum() uint64
}](vals []T, depth int) uint64 {
	arr := [3]T{}
	copy(arr[:], vals)
	v := uint64(0)
	for d := depth; d > 0; d-- {
		v ^= P(&arr[d%3]).Sum()
	}
	return v ^ P(&arr[0]).Sum() ^ P(&arr[0]).Sum() ^ P(&arr[0]).Sum()
}

func TestFramesGenerics(t *testing.T) {
	const rounds = 10
	e := frDrive(t, 0xaf03, func(e *frEnv) {
		for r := range rounds {
			vals := []frGenVal{
				{gcsNewWord(e.w(r, 1)), gcsString(e.seed, r, 2), e.w(r, 3)},
				{gcsNewWord(e.w(r, 4)), gcsString(e.seed, r, 5), e.w(r, 6)},
				{gcsNewWord(e.w(r, 7)), gcsString(e.seed, r, 8), e.w(r, 9)},
			}
			want := frGenWant[frGenVal](vals, r%4)
			got := frGenKeep[frGenVal](e, vals, r%4)
			e.check(got == want, "generic values round %d: %#x, want %#x", r, got, want)
			boxes := []frGenPtr{
				{gcsNewBox(e.seed, r, 10), gcsNewBox(e.seed, r, 11)},
				{gcsNewBox(e.seed, r, 12), gcsNewBox(e.seed, r, 13)},
				{gcsNewBox(e.seed, r, 14), gcsNewBox(e.seed, r, 15)},
			}
			want = frGenWant[frGenPtr](boxes, r%5)
			got = frGenKeep[frGenPtr](e, boxes, r%5)
			e.check(got == want, "generic pointers round %d: %#x, want %#x", r, got, want)
			for i := range boxes {
				e.check(gcsBoxOK(boxes[i][0], e.seed, r, 10+2*i) && gcsBoxOK(boxes[i][1], e.seed, r, 11+2*i), "generic pointers round %d: box %d", r, i)
			}
			type myInts []int64
			in := myInts{int64(e.w(r, 20)), int64(e.w(r, 21)), int64(e.w(r, 22)), int64(e.w(r, 23))}
			e.check(frGenSum(e, in) == in[0]+in[1]+in[2]+in[3], "generic sum round %d", r)
		}
	})
	frNoPins(t, e)
}

// ---- Range-over-func ----

// frSeq yields n heap boxes; between two it keeps state of its own in its
// frame (a local array and a pointer into it) and, when yieldIn, suspends
// the continuation itself. It has an open-coded deferred call, which must
// run exactly once, when the loop ends or breaks.
func frSeq(e *frEnv, r, n int, yieldIn bool, deferred *int) iter.Seq2[int, *gcsBox] {
	return func(yield func(int, *gcsBox) bool) {
		defer func() { *deferred++ }()
		var st [4]uint64
		p := &st[r%4]
		for i := range n {
			*p += e.w(r, 100+i)
			if yieldIn && i%2 == 1 {
				e.y()
			}
			if !yield(i, gcsNewBox(e.seed, r, 200+i)) {
				break
			}
		}
		e.check(p == &st[r%4] && gcsOnStack(unsafe.Pointer(p)), "range-over-func round %d: iterator's pointer into its frame moved", r)
	}
}

func TestFramesRangeFunc(t *testing.T) {
	const rounds = 10
	e := frDrive(t, 0xaf04, func(e *frEnv) {
		for r := range rounds {
			var seen [8]uint64 // written by the loop body through its closure
			outerBox := gcsNewBox(e.seed, r, 1)
			deferred := 0
			count := 0
			n := 3 + r%5
			for i, b := range frSeq(e, r, n, r%2 == 0, &deferred) {
				e.check(gcsBoxOK(b, e.seed, r, 200+i), "range-over-func round %d: element %d before the yield", r, i)
				e.y()
				e.check(gcsBoxOK(b, e.seed, r, 200+i), "range-over-func round %d: element %d after the yield", r, i)
				e.check(gcsBoxOK(outerBox, e.seed, r, 1), "range-over-func round %d: the body's box", r)
				seen[i] = b.tag
				count++
				// Nested range-over-func, breaking out of both from the inner.
				if i == n-2 {
					inner := 0
					for j, c := range frSeq(e, r+100, 4, false, &deferred) {
						e.y()
						e.check(gcsBoxOK(c, e.seed, r+100, 200+j), "nested range-over-func round %d: element %d", r, j)
						inner++
						if j == 1 {
							break
						}
					}
					e.check(inner == 2, "nested range-over-func round %d: %d iterations", r, inner)
				}
				if r%3 == 0 && i == n-1 {
					break
				}
			}
			e.check(count == n, "range-over-func round %d: %d iterations, want %d", r, count, n)
			e.check(deferred == 2, "range-over-func round %d: iterators' deferred calls ran %d times, want 2", r, deferred)
			for i := range n {
				e.check(seen[i] == e.w(r, 200+i), "range-over-func round %d: seen[%d]", r, i)
			}
		}
	})
	frNoPins(t, e)
}

// A defer in a range-over-func loop body is attached to the enclosing
// function's frame as a runtime defer record (deferprocat): a yield in the
// loop body, or after the loop in the same function, must pin.
func TestFramesRangeFuncDeferPins(t *testing.T) {
	for _, after := range []bool{false, true} {
		pinCheck(t, pinScenario{
			reason: pinning.DeferRecord,
			provoke: func(yield func()) int {
				n := 0
				frRangeFuncDefer(&n, yield, after)
				return n
			},
			want: 22,
		})
	}
}

// frRangeFuncDefer defers a call from each of two iterations of a
// range-over-func loop, and yields in the second (or, if after, once the
// loop is done); each deferred call adds 10 to *n when it returns. It is
// a function of its own, not a closure called in place: Go 1.25 inlines
// such a closure and then runs the loop body's deferred calls when the
// function it was inlined into returns (go1.25.5 prints 2 where go1.26
// prints 22 for this shape, without weft).
//
//go:noinline
func frRangeFuncDefer(n *int, yield func(), after bool) {
	seq := func(yield func(int) bool) {
		for i := range 2 {
			if !yield(i) {
				return
			}
		}
	}
	for i := range seq {
		defer func() { *n += 10 }()
		if i == 1 && !after {
			yield()
		}
		*n++
	}
	if after {
		yield()
	}
}

// ---- Deferred calls and recover ----

// frDeferYield yields from an open-coded deferred call during a normal
// return, with another deferred call still pending in the same frame, and
// recover pending in a frame further out.
//
//go:noinline
func frDeferYield(e *frEnv, r int, log *[]string) (res uint64) {
	local := e.w(r, 1)
	box := gcsNewBox(e.seed, r, 2)
	defer func() {
		*log = append(*log, "outer")
		e.check(res == e.w(r, 3), "deferred round %d: result seen by the outer deferred call %#x", r, res)
		res ^= local
	}()
	defer func() {
		*log = append(*log, "inner")
		e.y()
		e.check(gcsBoxOK(box, e.seed, r, 2), "deferred round %d: box captured by the deferred call", r)
		e.check(local == e.w(r, 1), "deferred round %d: local captured by the deferred call", r)
		res = e.w(r, 3)
	}()
	return 7
}

//go:noinline
func frRecoverOuter(e *frEnv, r, depth int) (v any, ok bool) {
	defer func() {
		v = recover()
		ok = true
	}()
	frPanicDeep(e, r, depth)
	return nil, false
}

//go:noinline
func frPanicDeep(e *frEnv, r, depth int) {
	var pad [8]uint64
	pad[depth%8] = e.w(r, depth)
	if depth > 0 {
		frPanicDeep(e, r, depth-1)
	} else {
		e.y()
		panic(gcsNewBox(e.seed, r, 50))
	}
	e.fail("round %d: returned from under a panic", r)
}

func TestFramesDeferRecover(t *testing.T) {
	const rounds = 12
	e := frDrive(t, 0xaf05, func(e *frEnv) {
		for r := range rounds {
			var log []string
			got := frDeferYield(e, r, &log)
			e.check(got == e.w(r, 3)^e.w(r, 1), "deferred round %d: result %#x", r, got)
			e.check(strings.Join(log, ",") == "inner,outer", "deferred round %d: order %v", r, log)
			// recover in a frame frozen under the yield, for a panic raised
			// after the resume, at every depth relative to record cuts.
			v, ok := frRecoverOuter(e, r, r*2)
			b, isBox := v.(*gcsBox)
			e.check(ok && isBox && gcsBoxOK(b, e.seed, r, 50), "recover round %d: %v %v", r, v, ok)
			// A recover that returned nil (no panic), then a yield.
			func() {
				defer func() {
					if x := recover(); x != nil {
						e.fail("recover round %d: %v", r, x)
					}
				}()
				e.y()
			}()
			e.y()
		}
	})
	frNoPins(t, e)
	t.Logf("%s: %+v", continuation.Backend(), e.stats)
	if gcsStackCopy() && e.stats.Unwinds == 0 && os.Getenv("WEFT_THAW") != "eager" {
		t.Errorf("no panic crossed the return barrier: the test no longer tests what it says")
	}
}

// ---- Variadic calls, stack objects among the arguments ----

//go:noinline
func frVariadic(e *frEnv, r int, ps ...*uint64) uint64 {
	e.y()
	v := uint64(0)
	for i, p := range ps {
		if p == nil {
			e.fail("variadic round %d: nil element %d", r, i)
			continue
		}
		v ^= *p * uint64(i+1)
	}
	return v
}

// frArgObj takes an array by value (stack-assigned arguments) and keeps a
// pointer into it: a stack object in its argument area, which lies in its
// caller's frame.
//
//go:noinline
func frArgObj(e *frEnv, r int, a [5]*uint64, depth int) uint64 {
	p := &a[depth%5]
	v := uint64(0)
	if depth > 0 {
		b := a
		b[(depth+1)%5] = gcsNewWord(e.w(r, 300+depth))
		v = frArgObj(e, r, b, depth-1)
	} else {
		e.y()
	}
	if p != &a[depth%5] || !gcsOnStack(unsafe.Pointer(p)) {
		e.fail("argument object round %d depth %d: pointer into it moved", r, depth)
	}
	return v ^ **p
}

func frArgObjWant(e *frEnv, r int, a [5]*uint64, depth int) uint64 {
	v := uint64(0)
	for d := depth; d >= 0; d-- {
		v ^= *a[d%5]
		if d > 0 {
			a[(d+1)%5] = gcsNewWord(e.w(r, 300+d))
		}
	}
	return v
}

func TestFramesVariadicAndArgObjects(t *testing.T) {
	const rounds = 12
	e := frDrive(t, 0xaf06, func(e *frEnv) {
		for r := range rounds {
			x, y := e.w(r, 1), e.w(r, 2)
			h := gcsNewWord(e.w(r, 3))
			got := frVariadic(e, r, &x, h, &y, &x)
			want := x ^ *h*2 ^ y*3 ^ x*4
			e.check(got == want, "variadic round %d: %#x, want %#x", r, got, want)
			var a [5]*uint64
			for i := range a {
				a[i] = gcsNewWord(e.w(r, 10+i))
			}
			want = frArgObjWant(e, r, a, r*2)
			got = frArgObj(e, r, a, r*2)
			e.check(got == want, "argument objects round %d: %#x, want %#x", r, got, want)
		}
	})
	frNoPins(t, e)
}

// ---- Pointers into stack objects made by unsafe arithmetic ----

func TestFramesUnsafeInterior(t *testing.T) {
	const rounds = 10
	e := frDrive(t, 0xaf07, func(e *frEnv) {
		for r := range rounds {
			var arr [16]uint64
			var ptrs [4]*gcsBox
			for i := range arr {
				arr[i] = e.w(r, i)
			}
			for i := range ptrs {
				ptrs[i] = gcsNewBox(e.seed, r, 40+i)
			}
			base := unsafe.Pointer(&arr[0])
			last := (*uint64)(unsafe.Add(base, 15*8)) // the last word of the object
			mid := (*[4]uint64)(unsafe.Add(base, 4*8))
			sl := unsafe.Slice(&arr[3], 10)
			pp := (**gcsBox)(unsafe.Add(unsafe.Pointer(&ptrs), 3*8))
			e.y()
			e.check(gcsOnStack(unsafe.Pointer(last)) && last == &arr[15] && *last == e.w(r, 15), "unsafe round %d: pointer to the last word", r)
			e.check(unsafe.Pointer(mid) == unsafe.Pointer(&arr[4]) && mid[3] == e.w(r, 7), "unsafe round %d: interior array pointer", r)
			e.check(unsafe.SliceData(sl) == &arr[3] && len(sl) == 10 && sl[9] == e.w(r, 12), "unsafe round %d: slice of the local", r)
			e.check(pp == &ptrs[3] && gcsBoxOK(*pp, e.seed, r, 43), "unsafe round %d: pointer into a pointer array", r)
			for i := range ptrs {
				e.check(gcsBoxOK(ptrs[i], e.seed, r, 40+i), "unsafe round %d: ptrs[%d]", r, i)
			}
		}
	})
	frNoPins(t, e)
}

// ---- Channels, select, timers ----

//go:noinline
func frChanFrame(e *frEnv, r int, ch chan *gcsBox, tick *time.Timer) uint64 {
	var got *gcsBox
	p := &got // address-taken: the receive writes through a pointer into this frame
	ch <- gcsNewBox(e.seed, r, 1)
	select {
	case *p = <-ch:
	case <-tick.C:
		e.fail("chan round %d: timer fired", r)
	}
	e.y()
	e.check(gcsBoxOK(got, e.seed, r, 1), "chan round %d: received box", r)
	// A receive into an address-taken local, then a yield while a
	// sender waits on the channel with a value from this frame.
	done := make(chan struct{})
	v := gcsNewBox(e.seed, r, 2)
	go func() { defer close(done); ch <- v }()
	e.y()
	x := <-ch
	<-done
	e.check(x == v && gcsBoxOK(x, e.seed, r, 2), "chan round %d: value from a blocked sender", r)
	time.Sleep(time.Microsecond)
	e.y()
	return got.tag ^ x.tag
}

func TestFramesChannels(t *testing.T) {
	const rounds = 8
	e := frDrive(t, 0xaf08, func(e *frEnv) {
		ch := make(chan *gcsBox, 1)
		tick := time.NewTimer(time.Hour)
		defer tick.Stop()
		for r := range rounds {
			got := frChanFrame(e, r, ch, tick)
			e.check(got == e.w(r, 1)^e.w(r, 2), "chan round %d: %#x", r, got)
		}
	})
	frNoPins(t, e)
}

// ---- Finalizers, cleanups, weak pointers, sync.Pool ----

type frFinal struct {
	v   uint64
	pad [6]uint64
}

func TestFramesFinalizersAndWeak(t *testing.T) {
	const rounds = 6
	var finalized, cleaned atomic.Int64
	var pool sync.Pool
	e := frDrive(t, 0xaf09, func(e *frEnv) {
		for r := range rounds {
			f := &frFinal{v: e.w(r, 1)}
			runtime.SetFinalizer(f, func(*frFinal) { finalized.Add(1) })
			c := &frFinal{v: e.w(r, 2)}
			runtime.AddCleanup(c, func(n *atomic.Int64) { n.Add(1) }, &cleaned)
			wk := weak.Make(c)
			pooled, _ := pool.Get().(*frFinal)
			if pooled == nil {
				pooled = new(frFinal)
			}
			pooled.v = e.w(r, 3)
			for range 3 {
				e.y() // runs the collector several times while suspended
			}
			e.check(f.v == e.w(r, 1), "finalizer round %d: object changed", r)
			e.check(c.v == e.w(r, 2), "cleanup round %d: object changed", r)
			e.check(wk.Value() == c, "weak round %d: weak pointer lost its object while it was live in frozen frames", r)
			e.check(pooled.v == e.w(r, 3), "pool round %d: pooled object changed", r)
			e.check(finalized.Load() <= int64(r) && cleaned.Load() <= int64(r), "round %d: %d finalizers and %d cleanups ran for objects still live", r, finalized.Load(), cleaned.Load())
			runtime.KeepAlive(f)
			runtime.KeepAlive(c)
			pool.Put(pooled)
		}
	})
	frNoPins(t, e)
	if !gcPollUntil(leakPatience, func() bool { return finalized.Load() == rounds && cleaned.Load() == rounds }) {
		t.Errorf("%d finalizers and %d cleanups ran, want %d each", finalized.Load(), cleaned.Load(), rounds)
	}
}

// ---- Deep recursion, big frames, changing depths ----

// frDeep recurses to depth with a frame of size words (an address-taken
// array), yields at the bottom times times, and checks every frame's locals
// on the way up. Each frame also holds a closure over its own array that a
// frame further down calls.
//
//go:noinline
func frDeep(e *frEnv, r, depth, big, times int, up func() uint64) uint64 {
	var small [4]uint64
	small[depth%4] = e.w(r, 500+depth)
	mine := gcsNewWord(e.w(r, 600+depth))
	get := func() uint64 { return small[depth%4] }
	var v uint64
	switch {
	case depth > 0 && depth%7 == 0 && big > 0:
		v = frDeepBig(e, r, depth-1, big, times, get)
	case depth > 0:
		v = frDeep(e, r, depth-1, big, times, get)
	default:
		for range times {
			e.y()
		}
	}
	if up != nil {
		v ^= up()
	}
	e.check(small[depth%4] == e.w(r, 500+depth) && *mine == e.w(r, 600+depth), "deep round %d: frame at depth %d changed", r, depth)
	return v ^ *mine
}

//go:noinline
func frDeepBig(e *frEnv, r, depth, big, times int, up func() uint64) uint64 {
	var arr [2048]uint64 // 16 KiB
	n := min(big, len(arr))
	for i := range n {
		arr[i] = e.w(r, 1000+i)
	}
	p := &arr[n-1]
	v := frDeep(e, r, depth, big, times, up)
	for i := range n {
		if arr[i] != e.w(r, 1000+i) {
			e.fail("deep round %d: big frame above depth %d: word %d changed", r, depth, i)
			break
		}
	}
	e.check(p == &arr[n-1], "deep round %d: pointer into the big frame moved", r)
	return v
}

func frDeepWant(e *frEnv, r, depth int) uint64 {
	v := uint64(0)
	for d := 0; d <= depth; d++ {
		v ^= e.w(r, 600+d)
		if d < depth {
			v ^= e.w(r, 500+d+1)
		}
	}
	return v
}

func TestFramesDeepChangingDepth(t *testing.T) {
	depths := []int{1, 40, 3, 300, 17, 1000, 2, 64, 9, 500}
	shorts := thawShorts()
	defer func() { t.Logf("%d thaws grew the stack first", thawShorts()-shorts) }()
	e := frDrive(t, 0xaf0a, func(e *frEnv) {
		for r, d := range depths {
			big := 0
			if r%2 == 1 {
				big = 2048
			}
			got := frDeep(e, r, d, big, 1+r%3, nil)
			want := frDeepWant(e, r, d)
			e.check(got == want, "deep round %d (depth %d): %#x, want %#x", r, d, got, want)
		}
	})
	frNoPins(t, e)
}

// ---- Yield from a deferred call run during a normal return, deep ----

//go:noinline
func frDeferDeep(e *frEnv, r, depth int) (out uint64) {
	mine := gcsNewBox(e.seed, r, 700+depth)
	defer func() {
		if depth%3 == 0 {
			e.y()
		}
		e.check(gcsBoxOK(mine, e.seed, r, 700+depth), "deferred deep round %d: box at depth %d", r, depth)
		out ^= mine.tag
	}()
	if depth > 0 {
		return frDeferDeep(e, r, depth-1)
	}
	e.y()
	return 0
}

func TestFramesDeferDeep(t *testing.T) {
	const rounds = 6
	e := frDrive(t, 0xaf0b, func(e *frEnv) {
		for r := range rounds {
			d := 5 + r*7
			got := frDeferDeep(e, r, d)
			want := uint64(0)
			for i := 0; i <= d; i++ {
				want ^= e.w(r, 700+i)
			}
			e.check(got == want, "deferred deep round %d: %#x, want %#x", r, got, want)
		}
	})
	frNoPins(t, e)
}

// ---- A deferred call that yields during a normal return, then panics ----

// frPanicAfterYield is deferred by frExitPanic as a plain function call (no
// closure over the deferring frame, so the thaw policy need not keep the
// two in one record): it yields, and after the resume panics with a box.
//
//go:noinline
func frPanicAfterYield(e *frEnv, r int, mine *gcsBox) {
	var pad [4]uint64
	pad[r%4] = e.w(r, 800)
	e.y()
	e.check(pad[r%4] == e.w(r, 800) && gcsBoxOK(mine, e.seed, r, 801), "exit panic round %d: deferred call's locals", r)
	panic(gcsNewBox(e.seed, r, 802))
}

// frExitPanic returns normally; its last deferred call to run yields, and
// panics after the resume, and its first recovers that panic: the panic
// happens in frames thawed above frExitPanic's, which may still be frozen
// below the barrier, in the middle of its exit sequence.
//
//go:noinline
func frExitPanic(e *frEnv, r, depth int) (v any, res uint64) {
	if depth > 0 {
		return frExitPanic(e, r, depth-1)
	}
	local := gcsNewBox(e.seed, r, 803)
	defer func() {
		v = recover()
		res ^= local.tag
	}()
	defer frPanicAfterYield(e, r, gcsNewBox(e.seed, r, 801))
	return nil, e.w(r, 804)
}

func TestFramesExitSequencePanic(t *testing.T) {
	const rounds = 10
	e := frDrive(t, 0xaf0c, func(e *frEnv) {
		for r := range rounds {
			v, res := frExitPanic(e, r, r%4)
			b, ok := v.(*gcsBox)
			e.check(ok && gcsBoxOK(b, e.seed, r, 802), "exit panic round %d: recovered %v", r, v)
			e.check(res == e.w(r, 804)^e.w(r, 803), "exit panic round %d: result %#x", r, res)
			e.y()
		}
	})
	frNoPins(t, e)
	t.Logf("%s: %+v", continuation.Backend(), e.stats)
	if gcsStackCopy() && e.stats.Unwinds == 0 && os.Getenv("WEFT_THAW") != "eager" {
		t.Errorf("no panic crossed the return barrier: the test no longer tests what it says")
	}
}

// ---- Stack objects that point to themselves ----

// A strings.Builder keeps its own address (hidden from escape analysis by
// abi.NoEscape, so a local Builder stays on the stack) and panics if it
// finds itself moved; thaw must relocate that pointer with the object. A
// sync.Once's mutex is held across a yield from inside Do, and unlocked
// after the resume on another goroutine.
func TestFramesSelfPointers(t *testing.T) {
	const rounds = 10
	e := frDrive(t, 0xaf0d, func(e *frEnv) {
		for r := range rounds {
			var sb strings.Builder
			sb.WriteString(gcsString(e.seed, r, 1))
			e.y()
			sb.WriteString(gcsString(e.seed, r, 2)) // panics if sb.addr was not relocated
			e.check(sb.String() == gcsString(e.seed, r, 1)+gcsString(e.seed, r, 2), "builder round %d: %q", r, sb.String())
			var once sync.Once
			n := 0
			once.Do(func() {
				n++
				e.y()
				e.check(sb.Len() == len(gcsString(e.seed, r, 1))+len(gcsString(e.seed, r, 2)), "once round %d: builder length", r)
			})
			once.Do(func() { n++ })
			e.check(n == 1, "once round %d: ran %d times", r, n)
		}
	})
	frNoPins(t, e)
}

// frBigChain recurses depth frames, every third with a 16 KiB local array
// and none holding a pointer into another's frame (so lazy thaw cuts them
// into separate records), and yields at the bottom without growing the
// stack after the resume: returning into the barrier, the next record of
// big frames may not fit in the runner's small stack, and the barrier
// must grow it with the results of the frame that returned held aside.
//
//go:noinline
func frBigChain(e *frEnv, r, depth int) (uint64, *gcsBox) {
	if depth%3 == 0 && depth > 0 {
		return frBigFrame(e, r, depth)
	}
	mine := gcsNewBox(e.seed, r, 900+depth)
	if depth == 0 {
		if !continuation.Yield(e.s) {
			e.fail("round %d: Yield returned false", r)
		}
		e.yields.Add(1)
		return e.w(r, 899), mine
	}
	v, b := frBigChain(e, r, depth-1)
	e.check(gcsBoxOK(b, e.seed, r, 900+depth-1) || depth-1 > 0 && (depth-1)%3 == 0, "big chain round %d: box returned to depth %d", r, depth)
	e.check(gcsBoxOK(mine, e.seed, r, 900+depth), "big chain round %d: box at depth %d", r, depth)
	return v ^ mine.tag, mine
}

//go:noinline
func frBigFrame(e *frEnv, r, depth int) (uint64, *gcsBox) {
	var arr [2048]uint64
	for i := range arr {
		arr[i] = e.w(r, depth) + uint64(i)
	}
	v, b := frBigChain(e, r, depth-1)
	for i := range arr {
		if arr[i] != e.w(r, depth)+uint64(i) {
			e.fail("big chain round %d: big frame at depth %d: word %d changed", r, depth, i)
			break
		}
	}
	e.check(gcsBoxOK(b, e.seed, r, 900+depth-1) || (depth-1)%3 == 0, "big chain round %d: box returned to the big frame at depth %d", r, depth)
	return v, gcsNewBox(e.seed, r, 900+depth)
}

func TestFramesBigFramesAcrossBarrier(t *testing.T) {
	if !gcsStackCopy() {
		t.Skip("the return barrier is the stack-copying backend's")
	}
	shorts := thawShorts()
	e := &frEnv{t: t, s: scope.New(t.Name()), seed: 0xaf0e}
	const rounds = 6
	want := make([]uint64, rounds)
	c := continuation.New(e.s, func() {
		for r := range rounds {
			v, b := frBigChain(e, r, 40)
			want[r] = v
			e.check(gcsBoxOK(b, e.seed, r, 940), "big chain round %d: outermost box", r)
		}
	})
	for !c.IsDone() {
		runtime.GC()
		done := make(chan struct{})
		go func() { defer close(done); c.Run() }() // a fresh, small stack
		<-done
	}
	for r := range rounds {
		w := e.w(r, 899)
		for d := 1; d <= 40; d++ {
			if d%3 != 0 {
				w ^= e.w(r, 900+d)
			}
		}
		if want[r] != w {
			t.Errorf("round %d: %#x, want %#x", r, want[r], w)
		}
	}
	if len(e.errs) > 0 {
		t.Errorf("%d failures, first:\n\t%s", len(e.errs), strings.Join(e.errs, "\n\t"))
	}
	t.Logf("%+v; %d thaws grew the stack first", c.Stats(), thawShorts()-shorts)
	if os.Getenv("WEFT_THAW") != "eager" && thawShorts() == shorts {
		t.Errorf("no thaw had to grow the stack: the test no longer tests what it says")
	}
}
