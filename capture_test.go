//go:build amd64 && !race && !msan && !asan

package weft

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

type capNode struct {
	v    int
	next *capNode
}

// capCheck is what capLeaf reports about the chunk it captured, checked
// against the live frames while they still exist.
type capCheck struct {
	err      error
	frames   []string
	problems []string
	moved    bool // the stack moved while capture ran
}

// keepStill pre-grows the stack and stops the GC, so that the test's own
// checks of absolute stack addresses stay meaningful.
func keepStill(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	old := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	growStackBy(128 << 10)
}

//go:noinline
func growStackBy(n int) byte {
	var buf [1024]byte
	if n <= 0 {
		return buf[0]
	}
	return growStackBy(n-len(buf)) + buf[n%len(buf)]
}

// capLeaf captures the region up to boundary and checks the chunk against
// the live stack: every word is accounted for exactly once, pointers out of
// the stack are in ptrs, pointers into the region are offsets that point
// where the live ones do, and want (pointers the callers keep live) and
// wantRefs (addresses of stack locals they keep live, passed as pointers so
// that a stack move updates them, and never leaked, so that the locals stay
// on the stack) are all found. capLeaf's own frame changes once
// capture returns, so its words are not compared.
//
//go:noinline
func capLeaf(c *stackChunk, boundary uintptr, want []unsafe.Pointer, wantRefs []unsafe.Pointer) capCheck {
	var res capCheck
	watchCleared(c)
	defer clearedWords.Delete(c)
	hi := rt.CurG().StackHi
	res.err = c.capture(boundary, false, nil)
	res.moved = rt.CurG().StackHi != hi
	_, sp := arch.CallerPCSP() // capLeaf's SP: the region's base
	if res.err != nil {
		return res
	}
	for _, f := range c.frames() {
		res.frames = append(res.frames, rt.FindFunc(f.pc).Name())
	}
	// sp follows the stack if it moves while these checks run (they call
	// append and fmt); every address is derived from it afresh, never
	// cached as an integer across a call.
	base := func() uintptr { return uintptr(sp) }
	fc := c.flat()
	own := fc.frames[0].fp / uint32(wordSize) // words of capLeaf's own frame
	live := func(w uint32) uintptr { return *(*uintptr)(unsafe.Add(sp, uintptr(w)*wordSize)) }
	seen := map[uint32]string{}
	for i, w := range fc.ptrAt {
		if w >= own && live(w) != uintptr(fc.ptrs[i]) {
			res.problems = append(res.problems, fmt.Sprintf("ptrs[%d] = %p, live word %d holds %#x", i, fc.ptrs[i], w, live(w)))
		}
		seen[w] = "ptr"
	}
	for _, r := range fc.refs {
		if r.at >= own && live(r.at) != base()+uintptr(r.target) {
			res.problems = append(res.problems, fmt.Sprintf("ref at word %d targets offset %d, live word holds offset %d", r.at, r.target, live(r.at)-base()))
		}
		if seen[r.at] != "" {
			res.problems = append(res.problems, fmt.Sprintf("word %d is both a %s and a ref", r.at, seen[r.at]))
		}
		seen[r.at] = "ref"
	}
	for _, w := range clearedOf(c) {
		seen[w] = "cleared dead-object word"
	}
	for w, v := range fc.words {
		switch {
		case int32(w) == fc.outerBP:
			// Points into the boundary frame; the runtime adjusts the live
			// word if the stack moves, the image keeps the old value, and
			// thaw patches it. It must point above the region.
			if live(uint32(w)) < base()+uintptr(len(fc.words))*wordSize {
				res.problems = append(res.problems, fmt.Sprintf("outermost saved frame pointer %#x does not point above the region", live(uint32(w))))
			}
		case seen[uint32(w)] != "":
			if v != 0 {
				res.problems = append(res.problems, fmt.Sprintf("word %d is a %s but not zeroed in the image", w, seen[uint32(w)]))
			}
		case uint32(w) >= own && v != live(uint32(w)):
			res.problems = append(res.problems, fmt.Sprintf("word %d (%s): image %#x, live %#x", w, c.whereIs(uint32(w)), v, live(uint32(w))))
		}
	}
	for _, p := range want {
		if !slices.Contains(fc.ptrs, p) {
			res.problems = append(res.problems, fmt.Sprintf("live pointer %p is not in ptrs", p))
		}
	}
	for _, ref := range wantRefs {
		found := false
		for _, r := range fc.refs {
			found = found || uintptr(ref)-base() == uintptr(r.target)
		}
		if !found {
			res.problems = append(res.problems, fmt.Sprintf("pointer to stack local at region offset %d is not among the refs (region of %d bytes)", uintptr(ref)-base(), len(fc.words)*int(wordSize)))
		}
	}
	if fc.outerBP < 0 {
		res.problems = append(res.problems, "the outermost frame's saved frame pointer was not found")
	}
	return res
}

//go:noinline
func capMid(c *stackChunk, boundary uintptr, local *capNode, heap *capNode, arr *[2]*capNode, s string) capCheck {
	want := []unsafe.Pointer{unsafe.Pointer(heap), unsafe.Pointer(unsafe.StringData(s)), unsafe.Pointer(arr[0])}
	res := capLeaf(c, boundary, want, []unsafe.Pointer{unsafe.Pointer(local), unsafe.Pointer(arr)})
	// Keep everything live across the capture.
	local.v += heap.v + arr[0].v + len(s)
	return res
}

// capKeep makes the closures passed to capCall escape, so that they and
// what they capture live on the heap, as a continuation's body does.
var capKeep func()

// capCall is the boundary of the regions under test, as the entry
// trampoline (arch.Enter) is for a continuation: it calls a body with no
// arguments.
//
//go:noinline
func capCall(f func()) { capKeep = f; f() }

// capCallOnStack is a boundary whose body closure stays on the caller's
// stack, with whatever it captures by reference.
//
//go:noinline
func capCallOnStack(f func()) { f() }

func capBoundary(f any) uintptr { return rt.FindFunc(reflect.ValueOf(f).Pointer()).Entry() }

func TestCaptureRegion(t *testing.T) {
	keepStill(t)
	var c stackChunk
	boundary := capBoundary(capCall)
	var res capCheck
	capCall(func() {
		local := capNode{v: 1}
		heap := &capNode{v: 2}
		var arr [2]*capNode // address-taken: a stack object
		arr[0] = &capNode{v: 3}
		s := fmt.Sprint("string on the heap ", 4)
		res = capMid(&c, boundary, &local, heap, &arr, s)
	})
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantFrames := []string{enginePrefix + "capLeaf", enginePrefix + "capMid", enginePrefix + "TestCaptureRegion.func1"}
	if !slices.Equal(res.frames, wantFrames) {
		t.Errorf("frames %v, want %v", res.frames, wantFrames)
	}
	for _, p := range res.problems {
		t.Error(p)
	}
	if fc := c.flat(); len(fc.ptrs) == 0 || len(fc.refs) == 0 {
		t.Fatalf("%d pointers, %d refs", len(fc.ptrs), len(fc.refs))
	}
}

//go:noinline
func capPlain(c *stackChunk, boundary uintptr) error { return c.capture(boundary, false, nil) }

// capWithRangeFuncDefer captures from a range-over-func loop body that
// has deferred a call: a range-over-func defer record, which pins.
//
//go:noinline
func capWithRangeFuncDefer(c *stackChunk, boundary uintptr) (err error) {
	for range func(body func() bool) { body() } {
		defer func() {}()
		err = c.capture(boundary, false, nil)
	}
	return err
}

// callMakeFunc calls f from a function made by reflect.MakeFunc: through
// reflect.makeFuncStub, whose frame pins with ReflectFrame.
func callMakeFunc(f func()) {
	var g func()
	reflect.ValueOf(&g).Elem().Set(reflect.MakeFunc(reflect.TypeOf(g), func([]reflect.Value) []reflect.Value {
		f()
		return nil
	}))
	g()
}

func TestCapturePins(t *testing.T) {
	keepStill(t)
	var c stackChunk
	check := func(name string, want pinning.Reason, err error) {
		t.Helper()
		var pe *errPinned
		if !errors.As(err, &pe) || pe.reason != want {
			t.Errorf("%s: capture returned %v, want pinned by %v", name, err, want)
		}
	}
	b := capBoundary(capCall)
	var err error
	capCall(func() { err = capWithRangeFuncDefer(&c, b) })
	check("range-over-func defer record in the region", pinning.DeferRecord, err)

	capCall(func() { pinning.Do(func() { err = capPlain(&c, b) }) })
	check("pinning.Do", pinning.CriticalSection, err)

	capCall(func() { callMakeFunc(func() { err = capPlain(&c, b) }) })
	check("reflect.MakeFunc", pinning.ReflectFrame, err)

	capCall(func() { reflect.ValueOf(func() { err = capPlain(&c, b) }).Call(nil) })
	if err != nil {
		t.Errorf("region with reflect.Value.Call frames: %v", err)
	}

	// The body's closure and what it captures stay in the boundary's
	// caller's frame: the body frame points outside the region.
	outside := 0
	var perr error
	capCallOnStack(func() {
		perr = capPlain(&c, capBoundary(capCallOnStack))
		outside++
	})
	check("pointer to a frame outside the region", pinning.StackPointer, perr)

	capCall(func() { err = capPlain(&c, b) })
	if err != nil {
		t.Errorf("plain region: %v", err)
	}
}

func TestCaptureNoBoundary(t *testing.T) {
	keepStill(t)
	var c stackChunk
	done := make(chan error)
	go func() { done <- capPlain(&c, capBoundary(capCall)) }() // no capCall frame on this goroutine
	if err := <-done; err == nil || errors.As(err, new(*errPinned)) {
		t.Fatalf("capture without a boundary frame: %v", err)
	}
}

// capPadded adds k small frames to the region before capMid, so that the
// region ends at varying depths and capture's own calls often cross the end
// of the stack.
//
//go:noinline
func capPadded(k int, c *stackChunk, boundary uintptr, local *capNode, heap *capNode, arr *[2]*capNode, s string) capCheck {
	var pad [12]uintptr
	pad[k%len(pad)] = uintptr(k)
	if k > 0 {
		res := capPadded(k-1, c, boundary, local, heap, arr, s)
		if pad[k%len(pad)] != uintptr(k) {
			res.problems = append(res.problems, fmt.Sprintf("pad frame %d corrupted", k))
		}
		return res
	}
	return capMid(c, boundary, local, heap, arr, s)
}

// Capture on fresh goroutines, at region depths that vary so that the stack
// must grow (and so move) while capture runs, with collections running all
// the while: the chunk must still describe the live frames exactly.
func TestCaptureWhileStackMoves(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	defer collectWhile()()
	b := capBoundary(capCall)
	moved := 0
	const n = 400
	for i := 0; i < n; i++ {
		done := make(chan capCheck)
		go func() {
			var c stackChunk
			var res capCheck
			capCall(func() {
				local := capNode{v: i}
				heap := &capNode{v: 2 * i}
				var arr [2]*capNode
				arr[0] = &capNode{v: 3}
				s := fmt.Sprint("string ", i)
				res = capPadded(i%200, &c, b, &local, heap, &arr, s)
			})
			done <- res
		}()
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		for _, p := range res.problems {
			t.Error(p)
		}
		if res.moved {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the stack never moved during a capture: the test does not test what it says")
	}
	t.Logf("the stack moved during %d of %d captures", moved, n)
}

// whereIs names the frame holding word w and w's offset from its SP.
func (c *stackChunk) whereIs(w uint32) string {
	off := w * uint32(wordSize)
	for _, f := range c.flat().frames {
		if off < f.fp {
			return fmt.Sprintf("%s+%d of %d, pc %#x", rt.FindFunc(f.pc).Name(), off-f.sp, f.fp-f.sp, f.pc)
		}
	}
	return "?"
}

// collectWhile runs garbage collections back to back on a goroutine of its
// own until the function it returns is called, which waits for it to stop.
func collectWhile() (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
				runtime.GC()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// clearedWords records what hooks.cleared is told about the chunks that
// capLeaf watches, for clearedOf. It holds only those, and only while
// capLeaf checks them: a chunk stored here is never collected, and so
// neither is its continuation nor anything its frames point to, which
// made every capture of this test binary live for good (20 MB per run of
// TestCaptureWhileStackMoves, the heap and each GOGC=1 collection growing
// with -count).
var clearedWords sync.Map // *stackChunk -> []uint32

// watchCleared has hooks.cleared record c's captures until
// clearedWords.Delete(c).
func watchCleared(c *stackChunk) { clearedWords.Store(c, []uint32(nil)) }

func init() {
	hooks.cleared = func(c *stackChunk, words []uint32) {
		if _, ok := clearedWords.Load(c); ok {
			clearedWords.Store(c, slices.Clone(words))
		}
	}
}

// clearedOf returns the words of c's last capture that were zeroed as
// stale addresses into the stack in unreachable stack objects.
func clearedOf(c *stackChunk) []uint32 {
	if v, ok := clearedWords.Load(c); ok {
		return v.([]uint32)
	}
	return nil
}
