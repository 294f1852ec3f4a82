//go:build amd64 && !race && !msan && !asan

package weft

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// A body frozen at each yield and thawed on a new goroutine every time:
// locals, pointers to heap objects and to its own stack locals, and a
// pointer to an address-taken array must all come back.
func TestStackCopyRoundTrip(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	c := &stackState{}
	var trace []string
	c.body = func() {
		x := 10
		p := &x // a pointer to this frame's own local
		h := &capNode{v: 5}
		var arr [2]*capNode
		arr[0] = h
		q := &arr
		for i := 0; i < 5; i++ {
			if !stackYield(c) {
				trace = append(trace, "pinned: "+c.refusal().Error())
				return
			}
			*p += i
			runtime.GC()
			trace = append(trace, fmt.Sprint(x, h.v, q[0].v, len(trace)))
		}
	}
	for i := 0; !c.done; i++ {
		if i > 10 {
			t.Fatal("the body did not finish")
		}
		done := make(chan struct{})
		go func() { // a fresh goroutine for every run
			defer close(done)
			c.run()
		}()
		<-done
		runtime.GC()
	}
	want := []string{"10 5 5 0", "11 5 5 1", "13 5 5 2", "16 5 5 3", "20 5 5 4"}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace %q, want %q", trace, want)
	}
}

// deepLocals recurses depth frames with a local in each that stays live across
// the yields at the bottom, and checks every local on the way up.
//
//go:noinline
func deepLocals(c *stackState, depth, yields int, sum *int) bool {
	local := depth*7 + 1
	node := &capNode{v: depth}
	if depth == 0 {
		for i := 0; i < yields; i++ {
			if !stackYield(c) {
				return false
			}
			arch.GrowStack(uintptr(i%4) * 16 << 10) // grow the stack after a thaw
		}
		*sum += local
		return true
	}
	ok := deepLocals(c, depth-1, yields, sum)
	if local != depth*7+1 || node.v != depth {
		panic(fmt.Sprintf("frame %d: local %d node %d after thaw", depth, local, node.v))
	}
	*sum += local
	return ok
}

func runToEnd(t *testing.T, c *stackState, max int) {
	t.Helper()
	for i := 0; !c.done; i++ {
		if i > max {
			t.Fatal("the body did not finish")
		}
		done := make(chan struct{})
		go func() { defer close(done); c.run() }()
		<-done
		if c.refusal() != nil {
			t.Fatal(c.refusal())
		}
	}
}

// Deep stacks: capture grows its own goroutine's stack while it walks 300
// frames, and the thawed frames must survive further growth and collection.
func TestStackCopyDeep(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	for _, depth := range []int{1, 50, 300} {
		c := &stackState{}
		sum := 0
		ok := true
		c.body = func() { ok = deepLocals(c, depth, 20, &sum) }
		runToEnd(t, c, 25)
		want := 0
		for d := 0; d <= depth; d++ {
			want += d*7 + 1
		}
		if !ok || sum != want {
			t.Fatalf("depth %d: ok %v, sum %d, want %d", depth, ok, sum, want)
		}
	}
}

// Many goroutines freezing and thawing at once, the collector running.
func TestStackCopyConcurrent(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const workers, each = 8, 40
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for k := 0; k < each; k++ {
				c := &stackState{}
				sum := 0
				c.body = func() { deepLocals(c, 10+k%20, 5, &sum) }
				for i := 0; !c.done; i++ {
					if i > 10 || c.refusal() != nil {
						errs <- fmt.Errorf("worker %d: %v", w, c.refusal())
						return
					}
					done := make(chan struct{})
					go func() { defer close(done); c.run() }()
					<-done
				}
				if sum == 0 {
					errs <- fmt.Errorf("worker %d: no result", w)
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

var capEscape *capNode

var prevMem, prevPtrs unsafe.Pointer

// bpChainFrames is the number of bpRecurse frames checkBPChain found
// linked, summed over the checks.
var bpChainFrames int

// requireStackCopy skips a test of the stack-copying backend's Yield where
// that backend is not in use (CI checks that it is on linux/amd64).
func requireStackCopy(t *testing.T) {
	t.Helper()
	if !useStackCopy {
		t.Skip("needs the stack-copying backend, which is not in use: " + backendName)
	}
}

// yieldThrice yields to s three times from its own frame, with locals live
// across the yields, and checks what each Yield returns.
//
//go:noinline
func yieldThrice(s *scope.Scope, want **Cont, sum *int) {
	a, b := 3, &capNode{v: 4}
	for i := range 3 {
		got, perr := Yield(s)
		if perr != nil || got != *want {
			panic(errors.New("Yield returned the wrong continuation, or an error"))
		}
		runtime.GC()
		a += i
		b.v += a
	}
	*sum = a + b.v
}

// A yield freezes the frames from Yield's caller down, not Yield's own:
// the innermost frozen frame continues in the caller, where Yield returns,
// and every resume (on a fresh goroutine, after a collection) gets Yield's
// results from the thaw: in the result registers (thawYield), or, with
// the record's rarely made part in place, from yieldReturn.
func TestStackCopyYieldLeavesOutItsFrame(t *testing.T) {
	requireStackCopy(t)
	for _, rare := range []bool{false, true} {
		testYieldLeavesOutItsFrame(t, rare)
	}
}

func testYieldLeavesOutItsFrame(t *testing.T, rare bool) {
	s := scope.New("elide")
	var c *Cont
	sum := 0
	c = NewCont(s, func() { yieldThrice(s, &c, &sum) })
	mode := thawYield
	if rare {
		// As after a refused yield or a panic at the barrier: the
		// resume asks yieldReturn, which finds no reason kept.
		c.stack.rareState()
		mode = rethrowYieldReturn
	}
	for runs := 0; !c.IsDone(); runs++ {
		if runs > 3 {
			t.Fatal("the body did not end after three yields")
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			growBy(8) // a larger stack than the next goroutine's
			c.Run(nil)
		}()
		<-done
		if c.IsDone() {
			break
		}
		if !c.stack.elided {
			t.Fatal("the yield's capture did not leave out Yield's frame")
		}
		if runs > 0 && c.stack.mode != mode {
			t.Fatalf("rare=%v: resumed in mode %d, want %d", rare, c.stack.mode, mode)
		}
		recs := c.stack.chunk.records()
		if fn := rt.FindFunc(recs[0].PC - 1).Name(); fn != enginePrefix+"yieldThrice" {
			t.Fatalf("the innermost frozen frame continues in %s, want yieldThrice (Yield's caller)", fn)
		}
		runtime.GC()
	}
	// a: 3+0+1+2 = 6; b: 4+3+4+6 = 17.
	if sum != 23 {
		t.Fatalf("sum %d, want 23", sum)
	}
	if st := c.Stats(); st.Yields != 3 || st.FramesFrozen == 0 || st.FramesThawed != st.FramesFrozen {
		t.Fatalf("counters %+v: want 3 yields, every frame frozen thawed", st)
	}
}

// A yield to an enclosing scope whose continuation cannot be frozen (a
// reflect.MakeFunc stub between it and the inner one) thaws the inner
// continuation again, and yieldReturn makes Yield return the pinning error, running the
// enclosing continuation's handler there: above the thawed frames, with
// the collector and stack growth in the handler, and a panic from it
// recovered by the caller of Yield.
func TestStackCopyYieldReturnPinned(t *testing.T) {
	requireStackCopy(t)
	outerS, innerS := scope.New("elide-outer"), scope.New("elide-inner")
	for _, panics := range []bool{false, true} {
		var handled int
		var got *Cont
		var perr *pinning.Error
		var recovered any
		deferRan := false
		val := 0
		inner := NewCont(innerS, func() {
			defer func() { deferRan = true }()
			x, h := 7, &capNode{v: 8}
			func() {
				defer func() { recovered = recover() }()
				got, perr = Yield(outerS)
			}()
			runtime.GC()
			val = x + h.v
		})
		outer := NewCont(outerS, func() {
			callMakeFunc(func() {
				for !inner.IsDone() {
					inner.Run(nil)
				}
			})
		})
		outer.SetHandler(&Handler{Pinned: func(c *Cont, e *pinning.Error) {
			handled++
			runtime.GC()
			growBy(32) // moves the stack under the thawed frames
			if panics {
				panic(e)
			}
		}})
		outer.Run(nil)
		if !outer.IsDone() || !inner.IsDone() {
			t.Fatalf("panics=%v: the continuations did not finish", panics)
		}
		if handled != 1 || val != 15 || !deferRan {
			t.Fatalf("panics=%v: handler ran %d times, val %d, inner's deferred call ran: %v", panics, handled, val, deferRan)
		}
		// The inner continuation's frames were frozen and thawed back,
		// though its yield suspended nothing: the counters say so.
		if st := inner.Stats(); st.Yields != 0 || st.FramesFrozen == 0 || st.FramesThawed != st.FramesFrozen || st.BytesThawed != st.BytesFrozen {
			t.Fatalf("panics=%v: inner's stats %+v: want no yield, and as many frames and bytes thawed as frozen", panics, st)
		}
		if panics {
			if e, ok := recovered.(*pinning.Error); !ok || e.Reason != pinning.ReflectFrame {
				t.Fatalf("recovered %v, want the handler's *pinning.Error (ReflectFrame)", recovered)
			}
			continue
		}
		if got != outer || perr == nil || perr.Reason != pinning.ReflectFrame {
			t.Fatalf("Yield returned %p, %v; want the outer continuation %p and a ReflectFrame error", got, perr, outer)
		}
	}
}

// The capture finds Yield's frame, and the frame walk the engine's other
// frames, by their names in the runtime's tables, built from the module
// path that nameAnchor's name gives: each must be its function's, and the
// module path the module's.
func TestStackCopyYieldName(t *testing.T) {
	for _, c := range []struct {
		fn   any
		name string
	}{
		{Yield, yieldName},
		{yieldReturn, yieldPathNames[0]},
		{(*Cont).freezeNested, yieldPathNames[1]},
		{stackYield, yieldPathNames[2]},
	} {
		if got := runtime.FuncForPC(reflect.ValueOf(c.fn).Pointer()).Name(); got != c.name {
			t.Errorf("%q in the runtime's tables; the frame walk looks for %q", got, c.name)
		}
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path == "" {
		t.Fatal("the test binary has no module build information")
	}
	if modulePath != bi.Main.Path {
		t.Fatalf("modulePath = %q, want the module's path %q", modulePath, bi.Main.Path)
	}
	if !enginePackage(contYieldName) || !enginePackage(schedulerPrefix+"Park") || enginePackage(modulePath+"/continuation_test.F") {
		t.Fatalf("enginePackage does not tell continuation's and scheduler's functions from their tests' (module %q)", modulePath)
	}
}

// TestYieldInlines checks that the helpers Yield and the capture fast path
// call from other packages are inlined into them (checkInlined).
func TestYieldInlines(t *testing.T) {
	const rt = "github.com/weftrt/weft/internal/rt."
	checkInlined(t, "Yield", Yield, rt+"CurG", rt+"(*G).LockCount", "github.com/weftrt/weft/internal/gls.CurrentG")
	checkInlined(t, "fastCapture", (*stackChunk).fastCapture, rt+"CurG")
}
