package continuation_test

import (
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/asmtest"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// One test per pinning reason: each provokes the reason from a
// continuation body and checks, on the stack-copying backend, that the
// onPinned handler is called exactly once with that reason and for that
// continuation, that Yield returns false, and that the body then goes on
// and the continuation still suspends, resumes and completes with the
// right result. On the portable backend the same scenario must suspend
// and resume normally, except pinning.Do and cgo callbacks, which pin on
// both.

// pinStackCopy reports whether continuations run on the stack-copying
// backend, which reports every pinning reason; the portable backend
// reports only CriticalSection, NativeFrame and LockedThread.
func pinStackCopy() bool { return strings.HasPrefix(continuation.Backend(), "stackcopy") }

// pinScenario is one way to provoke a pinned yield.
type pinScenario struct {
	// reason is the reason the stack-copying backend reports, or zero if
	// the scenario does not pin there.
	reason pinning.Reason
	// portablePins says that the portable backend pins too, with the same
	// reason: true only for CriticalSection, NativeFrame and LockedThread.
	portablePins bool
	// provoke runs in the body and calls yield exactly once, from the
	// place under test. It returns a value computed from state that lives
	// across the yield; want is the value it must return.
	provoke func(yield func()) int
	want    int
}

// pins reports whether the scenario's yield must be pinned on this backend.
func (sc pinScenario) pins() bool {
	return sc.reason != 0 && (sc.portablePins || pinStackCopy())
}

// pinCheck runs sc in a continuation whose body, after the provoked yield,
// yields once more from a place where nothing pins, and checks every step.
func pinCheck(t *testing.T, sc pinScenario) {
	t.Helper()
	s := scope.New(t.Name())
	var (
		ev      []string
		handled []*continuation.Continuation
		result  int
	)
	c := continuation.New(s, func() {
		ev = append(ev, "start")
		result = sc.provoke(func() {
			ok := continuation.Yield(s)
			ev = append(ev, fmt.Sprint("yield returned ", ok))
		})
		ev = append(ev, "provoked")
		ok := continuation.Yield(s) // nothing pins this one
		ev = append(ev, fmt.Sprint("plain yield returned ", ok))
	}, continuation.WithOnPinned(func(h *continuation.Continuation, r pinning.Reason) {
		handled = append(handled, h)
		ev = append(ev, "onPinned: "+r.String())
	}))
	step := func(name string, done bool, want ...string) {
		t.Helper()
		c.Run()
		if !slices.Equal(ev, want) {
			t.Fatalf("%s: events\n\t%q\nwant\n\t%q", name, ev, want)
		}
		if c.IsDone() != done {
			t.Fatalf("%s: IsDone() = %v, want %v", name, c.IsDone(), done)
		}
	}
	if sc.pins() {
		pinned := "onPinned: " + sc.reason.String()
		step("first Run", false, "start", pinned, "yield returned false", "provoked")
		step("second Run", true, "start", pinned, "yield returned false", "provoked",
			"plain yield returned true")
	} else {
		step("first Run", false, "start")
		step("second Run", false, "start", "yield returned true", "provoked")
		step("third Run", true, "start", "yield returned true", "provoked", "plain yield returned true")
	}
	for i, h := range handled {
		if h != c {
			t.Errorf("onPinned call %d got %v, not the continuation", i, h)
		}
	}
	if result != sc.want {
		t.Errorf("the body computed %d, want %d", result, sc.want)
	}
	st := c.Stats()
	wantSt := continuation.Stats{Runs: 3, Yields: 2}
	if sc.pins() {
		wantSt = continuation.Stats{Runs: 2, Yields: 1, Pinned: 1}
	}
	if st.Runs != wantSt.Runs || st.Yields != wantSt.Yields || st.Pinned != wantSt.Pinned {
		t.Errorf("Stats %+v, want Runs %d Yields %d Pinned %d", st, wantSt.Runs, wantSt.Yields, wantSt.Pinned)
	}
	if pinStackCopy() && (st.FramesFrozen == 0 || st.FramesThawed == 0) {
		t.Errorf("Stats %+v: the stack-copying backend froze or thawed no frames", st)
	}
	if sc.pins() {
		t.Logf("%s: pinned with %v", continuation.Backend(), sc.reason)
	} else {
		t.Logf("%s: suspended and resumed", continuation.Backend())
	}
}

// There is no test for pinning.UnknownFrame: the stack-copying backend
// reports it for a frame the unwinder cannot describe (no function at its
// PC, no SP delta, unreadable stack maps, a saved frame pointer outside the
// region) or when a capture fails for a reason that is not about one frame.
// Ordinary Go code, cgo, reflect and assembly with a Go declaration all
// produce frames that are either describable or pinned for a more precise
// reason first, so there is no honest way to provoke it from a test.

// TestPinCriticalSection: a yield inside pinning.Do pins on both backends.
func TestPinCriticalSection(t *testing.T) {
	pinCheck(t, pinScenario{
		reason:       pinning.CriticalSection,
		portablePins: true,
		provoke: func(yield func()) int {
			n := 1
			pinning.Do(func() {
				n += 10
				yield()
				n += 100
			})
			return n
		},
		want: 111,
	})
}

// pinDeferreturn yields from a deferred call that runtime.deferreturn
// runs as the function returns normally. The defer is in a loop, so it has
// a defer record rather than being open-coded: the compiler then returns
// through runtime.deferreturn, whose frame lies between the deferred call
// and the body. deferreturn unlinks the record before calling the deferred
// function, so what pins is the runtime frame, not the record.
//
//go:noinline
func pinDeferreturn(yield func()) (n int) {
	for i := 0; i < 1; i++ {
		defer func() {
			n += 10
			yield()
			n += 100
		}()
	}
	n = 1
	return n
}

// TestPinRuntimeFrame: a yield from a deferred call run by
// runtime.deferreturn pins with RuntimeFrame, at runtime.deferreturn.
func TestPinRuntimeFrame(t *testing.T) {
	pinCheck(t, pinScenario{reason: pinning.RuntimeFrame, provoke: pinDeferreturn, want: 111})
}

// pinPanicValue is what pinPanicking panics with.
var pinPanicValue = fmt.Errorf("pinning test panic")

// pinPanicking yields from a deferred call run while a panic unwinds
// (runtime.gopanic's frame, which holds the panic record, lies between the
// deferred call and the body), then recovers.
//
//go:noinline
func pinPanicking(yield func()) (n int) {
	defer func() {
		n += 10
		yield()
		if r := recover(); r != pinPanicValue {
			n = -1 // the panic was lost across the yield
			return
		}
		n += 100
	}()
	n = 1
	panic(pinPanicValue)
}

// TestPinPanicRecord: a yield from a deferred call run by a panic pins with
// PanicRecord (runtime.gopanic's frame holds the panic in progress), and the
// deferred call can still recover afterwards.
func TestPinPanicRecord(t *testing.T) {
	pinCheck(t, pinScenario{reason: pinning.PanicRecord, provoke: pinPanicking, want: 111})
}

// pinCallYield calls yield from a frame of its own.
//
//go:noinline
func pinCallYield(yield func()) { yield() }

// pinDeferLoop yields, further down, while its own frame has a defer
// record linked from the goroutine: the defer is in a loop, so it is not
// open-coded, and the record points at this frame.
//
//go:noinline
func pinDeferLoop(yield func()) (n int) {
	for i := 0; i < 1; i++ {
		defer func() { n += 100 }()
	}
	n = 1
	pinCallYield(yield)
	n += 10
	return n
}

// pinDeferRangeFunc yields from a range-over-func loop body that has
// deferred a call: the runtime keeps that call in a range-over-func defer
// record of this frame, which the stack-copying backend does not move.
func pinDeferRangeFunc(yield func()) (n int) {
	for range func(body func() bool) { body() } {
		defer func() { n += 100 }()
		n = 1
		pinCallYield(yield)
		n += 10
	}
	return n
}

// TestPinDeferRecord: a yield while a frame of the region has a
// range-over-func defer record pins with DeferRecord, and the deferred
// call still runs when that frame returns. A frame with plain defer
// records, on the heap (a defer in a loop) or on the stack (fmt's, around
// a String method), does not pin: its records move with it.
func TestPinDeferRecord(t *testing.T) {
	t.Run("RangeFunc", func(t *testing.T) {
		pinCheck(t, pinScenario{reason: pinning.DeferRecord, provoke: pinDeferRangeFunc, want: 111})
	})
	t.Run("Heap", func(t *testing.T) {
		pinCheck(t, pinScenario{provoke: pinDeferLoop, want: 111})
	})
	// fmt calls String and Error methods from a frame whose defers the
	// compiler allocates on the stack, not open-coded: a record too.
	t.Run("Stack", func(t *testing.T) {
		pinCheck(t, pinScenario{
			provoke: func(yield func()) int {
				n := 1
				if got := fmt.Sprint(pinStringer{yield, &n}); got != "stringer" {
					t.Errorf("fmt.Sprint gave %q", got)
				}
				return n + 100
			},
			want: 111,
		})
	})
}

// pinStringer's String method adds 10 to *n and yields.
type pinStringer struct {
	yield func()
	n     *int
}

func (p pinStringer) String() string {
	*p.n += 10
	p.yield()
	return "stringer"
}

// TestPinReflectFrame: a yield from the implementation of a reflect.MakeFunc
// function, or from a method called through a method value made by
// reflect (Value.Method(i).Interface()), pins with ReflectFrame. A yield
// from a function called by reflect.Value.Call suspends (reflect_test.go
// covers it fully).
func TestPinReflectFrame(t *testing.T) {
	t.Run("Call", func(t *testing.T) {
		pinCheck(t, pinScenario{
			provoke: func(yield func()) int {
				n := 1
				reflect.ValueOf(func() {
					n += 10
					yield()
					n += 100
				}).Call(nil)
				return n
			},
			want: 111,
		})
	})
	t.Run("MakeFunc", func(t *testing.T) {
		pinCheck(t, pinScenario{
			reason: pinning.ReflectFrame,
			provoke: func(yield func()) int {
				var f func(int) int
				reflect.ValueOf(&f).Elem().Set(reflect.MakeFunc(reflect.TypeOf(f), func(args []reflect.Value) []reflect.Value {
					v := args[0].Int()
					yield()
					return []reflect.Value{reflect.ValueOf(int(v * 10))}
				}))
				return f(11) + 1
			},
			want: 111,
		})
	})
	t.Run("MethodValue", func(t *testing.T) {
		pinCheck(t, pinScenario{
			reason: pinning.ReflectFrame,
			provoke: func(yield func()) int {
				n := 1
				m := reflect.ValueOf(pinMethoder{func() {
					n += 10
					yield()
					n += 100
				}}).Method(0).Interface().(func())
				m()
				return n
			},
			want: 111,
		})
	})
}

// pinMethoder's one method calls f.
type pinMethoder struct{ f func() }

func (m pinMethoder) Run() { m.f() }

// pinMakeFunc calls f from a function made by reflect.MakeFunc.
func pinMakeFunc(f func()) {
	var g func()
	reflect.ValueOf(&g).Elem().Set(reflect.MakeFunc(reflect.TypeOf(g), func([]reflect.Value) []reflect.Value {
		f()
		return nil
	}))
	g()
}

// TestPinAssemblyFrame: a yield from a Go function called back by assembly
// (asmtest.CallGo, amd64 only) pins with AssemblyFrame.
func TestPinAssemblyFrame(t *testing.T) {
	sc := pinScenario{
		reason: pinning.AssemblyFrame,
		provoke: func(yield func()) int {
			n := 1
			asmtest.CallGo(func() {
				n += 10
				yield()
				n += 100
			})
			return n
		},
		want: 111,
	}
	if runtime.GOARCH != "amd64" {
		// asmtest.CallGo is plain Go here: there is no assembly frame.
		sc.reason = 0
	}
	pinCheck(t, sc)
}

// pinNoescape hides p from escape analysis, as the runtime's noescape
// does: the result is p, but the compiler no longer sees it flow from p.
// It is how TestPinStackPointer gets a pointer to a stack variable of the
// test into a continuation body without moving that variable to the heap.
// That is unsafe on purpose: Go code cannot otherwise hold such a pointer
// in a frame of another function's callee chain. nocheckptr: checkptr
// (on under -race) would reject the conversion of an integer that points
// into the stack.
//
//go:nocheckptr
//go:nosplit
func pinNoescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return unsafe.Add(nil, x)
}

// pinGrowStack uses about n bytes of stack, so that the goroutine's stack
// is at least that much larger than the caller's depth when it returns.
//
//go:noinline
func pinGrowStack(n int) byte {
	var pad [1024]byte
	pad[n%len(pad)] = byte(n)
	if n <= len(pad) {
		return pad[n%len(pad)]
	}
	return pinGrowStack(n-len(pad)) + pad[n%len(pad)]
}

// pinHandoff carries the stack pointer from the test function into the
// body for a moment; see TestPinStackPointer.
type pinHandoff struct{ p *int }

// TestPinStackPointer: a frame of the body holds, live across the yield, a
// pointer to a variable in the test function's frame, which lies outside
// the continuation. The stack-copying backend cannot freeze that frame (the
// pointer would dangle once the frames are thawed elsewhere, or the stack
// moves), so it pins with StackPointer; the portable backend leaves the
// body's frames where they are and suspends.
//
// Ordinary Go code cannot build this: escape analysis would move x to the
// heap. pinNoescape hides &x from it, deliberately. Such a pointer is only
// sound while x's stack does not move, since the runtime relocates
// pointers into a stack only in that stack's own frames, and here it
// passes through the heap (pinHandoff) and, on the portable backend, lives
// in another goroutine's frame. So the test grows its stack beforehand and
// turns the collector off (no collection, no stack shrinking) for its
// duration, and the body clears the heap copy as soon as it has read it.
func TestPinStackPointer(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	pinGrowStack(64 << 10)
	pinStackPointer(t)
}

//go:noinline
func pinStackPointer(t *testing.T) {
	var x int
	px := (*int)(pinNoescape(unsafe.Pointer(&x)))
	h := &pinHandoff{p: px}
	pinCheck(t, pinScenario{
		reason: pinning.StackPointer,
		provoke: func(yield func()) int {
			p := h.p
			h.p = nil // no heap copy of the stack pointer survives
			*p = 1
			pinCallYield(yield) // p is live across the yield
			*p += 10
			return *p
		},
		want: 11,
	})
	if x != 11 {
		t.Errorf("the body left %d in the test's variable, want 11", x)
	}
}

// pinNested runs an inner continuation (scope si) nested in an outer one
// (scope so). The outer body starts the inner one through wrap, which puts
// a frame the stack-copying backend cannot freeze between the outer body
// and the inner Run when reason is not zero. The inner body yields to the
// outer scope: the frame is in the outer region, so the yield pins on the
// outer continuation (the one whose scope it named), and the inner Yield
// returns false. Then the inner body yields to its own scope, which wrap's
// frame does not pin, and both finish.
func pinNested(t *testing.T, reason pinning.Reason, portablePins bool, wrap func(run func())) {
	t.Helper()
	pins := reason != 0 && (portablePins || pinStackCopy())
	so, si := scope.New("outer"), scope.New("inner")
	var (
		ev           []string
		outerHandled []*continuation.Continuation
		inner        *continuation.Continuation
	)
	outer := continuation.New(so, func() {
		inner = continuation.New(si, func() {
			ev = append(ev, "inner start")
			x := 1
			ok := continuation.Yield(so)
			x += 10
			ev = append(ev, fmt.Sprint("inner yield to outer returned ", ok))
			ok = continuation.Yield(si)
			x += 100
			ev = append(ev, fmt.Sprint("inner yield to inner returned ", ok, ", x = ", x))
		}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
			ev = append(ev, "inner onPinned: "+r.String())
		}))
		y := 1
		wrap(inner.Run)
		y += 10
		ev = append(ev, fmt.Sprint("outer: inner returned, done ", inner.IsDone()))
		inner.Run()
		y += 100
		ev = append(ev, fmt.Sprint("outer: inner returned, done ", inner.IsDone(), ", y = ", y))
		ok := continuation.Yield(so) // nothing pins this one
		ev = append(ev, fmt.Sprint("outer plain yield returned ", ok))
	}, continuation.WithOnPinned(func(h *continuation.Continuation, r pinning.Reason) {
		outerHandled = append(outerHandled, h)
		ev = append(ev, "outer onPinned: "+r.String())
	}))
	step := func(name string, done bool, want ...string) {
		t.Helper()
		outer.Run()
		if !slices.Equal(ev, want) {
			t.Fatalf("%s: events\n\t%q\nwant\n\t%q", name, ev, want)
		}
		if outer.IsDone() != done {
			t.Fatalf("%s: outer IsDone() = %v, want %v", name, outer.IsDone(), done)
		}
	}
	pinned := []string{
		"inner start",
		"outer onPinned: " + reason.String(),
		"inner yield to outer returned false",
	}
	resumed := []string{
		"inner start",
		"inner yield to outer returned true",
	}
	rest := []string{
		"outer: inner returned, done false",
		"inner yield to inner returned true, x = 111",
		"outer: inner returned, done true, y = 111",
	}
	last := "outer plain yield returned true"
	if pins {
		step("first outer Run", false, slices.Concat(pinned, rest)...)
		step("second outer Run", true, slices.Concat(pinned, rest, []string{last})...)
		if len(outerHandled) != 1 || outerHandled[0] != outer {
			t.Errorf("the outer onPinned handler got %v, want the outer continuation once", outerHandled)
		}
	} else {
		step("first outer Run", false, "inner start")
		step("second outer Run", false, slices.Concat(resumed, rest)...)
		step("third outer Run", true, slices.Concat(resumed, rest, []string{last})...)
	}
	wantOuter := continuation.Stats{Runs: 3, Yields: 2}
	wantInner := continuation.Stats{Runs: 2, Yields: 2}
	if pins {
		wantOuter = continuation.Stats{Runs: 2, Yields: 1, Pinned: 1}
		wantInner = continuation.Stats{Runs: 2, Yields: 1}
	}
	for _, x := range []struct {
		name      string
		got, want continuation.Stats
	}{{"outer", outer.Stats(), wantOuter}, {"inner", inner.Stats(), wantInner}} {
		if x.got.Runs != x.want.Runs || x.got.Yields != x.want.Yields || x.got.Pinned != x.want.Pinned {
			t.Errorf("%s Stats %+v, want Runs %d Yields %d Pinned %d",
				x.name, x.got, x.want.Runs, x.want.Yields, x.want.Pinned)
		}
	}
	if pins {
		t.Logf("%s: pinned with %v", continuation.Backend(), reason)
	} else {
		t.Logf("%s: suspended and resumed", continuation.Backend())
	}
}

// pinDeferRangeFuncAround calls f from a range-over-func loop body that
// has deferred a call (a range-over-func defer record, which pins).
//
//go:noinline
func pinDeferRangeFuncAround(f func()) {
	for range func(body func() bool) { body() } {
		defer func() {}()
		f()
	}
}

// pinDeferLoopAround runs f in a frame with a defer record.
//
//go:noinline
func pinDeferLoopAround(f func()) {
	for i := 0; i < 1; i++ {
		defer func() {}()
	}
	f()
}

// TestPinNested: an inner continuation yields to the scope of the outer one
// while a frame the stack-copying backend cannot freeze lies between the
// outer body and the inner Run. The outer continuation's handler is called
// with the reason, the inner Yield returns false, and both finish. "None"
// is the control: nothing pins.
func TestPinNested(t *testing.T) {
	t.Run("CriticalSection", func(t *testing.T) {
		pinNested(t, pinning.CriticalSection, true, pinning.Do)
	})
	t.Run("ReflectFrame", func(t *testing.T) {
		pinNested(t, pinning.ReflectFrame, false, pinMakeFunc)
	})
	t.Run("DeferRecord", func(t *testing.T) {
		pinNested(t, pinning.DeferRecord, false, pinDeferRangeFuncAround)
	})
	t.Run("MovedDeferRecord", func(t *testing.T) {
		pinNested(t, 0, false, pinDeferLoopAround)
	})
	t.Run("AssemblyFrame", func(t *testing.T) {
		reason := pinning.AssemblyFrame
		if runtime.GOARCH != "amd64" {
			reason = 0 // asmtest.CallGo is plain Go here
		}
		pinNested(t, reason, false, asmtest.CallGo)
	})
	t.Run("None", func(t *testing.T) {
		pinNested(t, 0, false, func(run func()) { run() })
	})
}

// TestPinLockedThread: a body that locks its goroutine to its thread and
// yields before unlocking pins on both backends: on the stack-copying one
// its frames would be resumed on another goroutine's thread, and on the
// portable one the runtime would throw at the coroutine switch.
func TestPinLockedThread(t *testing.T) {
	if _, ok := rt.LockCount(); !ok {
		t.Skip("the thread's LockOSThread count cannot be read here (runtime layout not mirrored), so LockedThread is not detected")
	}
	pinCheck(t, pinScenario{
		reason:       pinning.LockedThread,
		portablePins: true,
		provoke: func(yield func()) int {
			n := 1
			runtime.LockOSThread()
			n += 10
			yield()
			n += 100
			runtime.UnlockOSThread()
			return n
		},
		want: 111,
	})
}

// A yield to an enclosing scope pins when a body it would suspend, other
// than the innermost, has locked its thread since it began: on the
// portable backend the enclosing body's goroutine would switch out locked
// where it began unlocked, and the runtime killed the process ("coro: OS
// thread locking must match locking at coroutine creation").
func TestPinLockedThreadInEnclosingBody(t *testing.T) {
	if _, ok := rt.LockCount(); !ok {
		t.Skip("the thread's LockOSThread count cannot be read here (runtime layout not mirrored), so LockedThread is not detected")
	}
	so, si := scope.New("outer"), scope.New("inner")
	var reasons []pinning.Reason
	yielded := true
	outer := continuation.New(so, func() {
		runtime.LockOSThread()
		inner := continuation.New(si, func() { yielded = continuation.Yield(so) })
		inner.Run()
		runtime.UnlockOSThread()
		if !inner.IsDone() {
			t.Error("the inner continuation did not finish")
		}
	}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
		reasons = append(reasons, r)
	}))
	outer.Run()
	if !outer.IsDone() {
		t.Fatal("the outer continuation was suspended, want the yield pinned")
	}
	if yielded || !slices.Equal(reasons, []pinning.Reason{pinning.LockedThread}) {
		t.Errorf("Yield returned %v with pin reasons %v, want false and [LockedThread]", yielded, reasons)
	}
}

// A continuation run from a goroutine locked to its thread yields and is
// resumed from unlocked goroutines and back: the locking is the runner's,
// not the body's, so nothing pins (stack-copying backend; the portable
// one must be resumed under the locking it was first run under,
// docs/limitations.md). A body that locks and unlocks between two yields
// does not pin either.
func TestLockedRunnerDoesNotPin(t *testing.T) {
	s := scope.New(t.Name())
	var reasons []pinning.Reason
	sum := 0
	c := continuation.New(s, func() {
		for i := range 6 {
			runtime.LockOSThread()
			sum += i
			runtime.UnlockOSThread()
			if !continuation.Yield(s) {
				t.Error("a yield pinned")
			}
		}
	}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
		reasons = append(reasons, r)
	}))
	for i := 0; !c.IsDone(); i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if i%2 == 0 && pinStackCopy() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			c.Run()
		}()
		<-done
	}
	if len(reasons) != 0 || sum != 15 {
		t.Fatalf("pinned for %v, sum %d", reasons, sum)
	}
}
