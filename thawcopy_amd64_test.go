//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
)

// thawPop copies a record's frames eight words at a time, then four, two
// and one, from the bottom up: the last words copied are the top of the
// record's outermost frame. These bodies yield twice from frames with 5 to
// 12 words of locals (and a heap pointer each, for the pointer table), so
// that the second capture's record, the frames thawed since the first,
// ends with that frame, and the record's length covers every remainder
// modulo 8 (the frames under it, scYieldKeeps's and stackYield's, are the same
// in all). Every word of the frame but the two that a thaw rewrites must
// come back as it was, with a collection between the rounds. (Dropping
// the four- or two-word copy fails it; a wrong last word does not, as that
// word is the return address, which the thaw replaces with the barrier's.)
func TestThawCopiesEveryWord(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const rounds = 12
	sizes := map[uintptr]bool{}
	for k, frame := range scFrames {
		c := &stackState{}
		bad := 0
		c.body = func() {
			for i := range rounds {
				heap := &capNode{v: i*10 + k}
				capEscape = heap
				if !frame(c, uintptr(i*10+k), heap) {
					bad++
				}
				runtime.GC()
			}
		}
		runToEnd(t, c, 2*rounds+2)
		if bad != 0 {
			t.Errorf("frame %d: %d of %d rounds came back with a wrong word", k, bad, rounds)
		}
		sizes[lastFrameWords%8] = true
	}
	if len(sizes) != 8 {
		t.Errorf("the frames' sizes cover remainders %v modulo 8 words, want all eight", sizes)
	}
}

// scYieldKeeps yields and reports whether it did and its caller's frame
// came back as it was, but for its two top words, the return address and
// the saved frame pointer, which a thaw may rewrite (the return barrier;
// the frame pointer chain at the stack's new place). Nothing of the
// caller runs from the copy before the yield to the one after.
//
//go:noinline
func scYieldKeeps(c *stackState) bool {
	before := callerFrame()
	if !stackYield(c) {
		return false
	}
	return sameFrame(before, callerFrame())
}

// callerFrame returns a copy of the frame of its caller's caller, but for
// its two top words.
//
//go:noinline
func callerFrame() []uintptr {
	pc, sp := arch.CallerPCSP() // this frame's
	for range 2 {
		d := descFor(pc)
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	words := uintptr(descFor(pc).size) / unsafe.Sizeof(uintptr(0))
	lastFrameWords = words
	return append([]uintptr(nil), unsafe.Slice((*uintptr)(sp), words-2)...)
}

// lastFrameWords is the size in words of the frame callerFrame copied
// last.
var lastFrameWords uintptr

func sameFrame(a, b []uintptr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// scFrames yield from frames with 5 to 12 words of locals.
var scFrames = []func(*stackState, uintptr, *capNode) bool{
	scFrame5, scFrame6, scFrame7, scFrame8, scFrame9, scFrame10, scFrame11, scFrame12,
}

//go:noinline
func scFrame5(c *stackState, seed uintptr, heap *capNode) bool {
	var a [5]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame6(c *stackState, seed uintptr, heap *capNode) bool {
	var a [6]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame7(c *stackState, seed uintptr, heap *capNode) bool {
	var a [7]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame8(c *stackState, seed uintptr, heap *capNode) bool {
	var a [8]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame9(c *stackState, seed uintptr, heap *capNode) bool {
	var a [9]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame10(c *stackState, seed uintptr, heap *capNode) bool {
	var a [10]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame11(c *stackState, seed uintptr, heap *capNode) bool {
	var a [11]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func scFrame12(c *stackState, seed uintptr, heap *capNode) bool {
	var a [12]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := scYieldKeeps(c) && scYieldKeeps(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}
