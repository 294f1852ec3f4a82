//go:build go1.25 && !go1.28 && !wasm

package rt

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// G mirrors the prefix of runtime.g that weft reads, identical in Go 1.25,
// 1.26 and 1.27: the goroutine's stack bounds and its innermost panic and defer
// records. Freeze keeps positions as offsets from StackHi, because the
// stack moves when it grows, and pins a region that a panic or defer record
// points into.
type G struct {
	StackLo, StackHi uintptr // [StackLo, StackHi) is the goroutine's stack
	stackguard0      uintptr
	stackguard1      uintptr
	Panic            unsafe.Pointer // *runtime._panic, innermost panic in progress
	Defer            unsafe.Pointer // *runtime._defer, innermost defer record
}

// CurG returns the calling goroutine's g.
func CurG() *G { return (*G)(arch.GPointer()) }

// deferRecord mirrors runtime._defer (identical in Go 1.25, 1.26 and 1.27).
type deferRecord struct {
	heap      bool
	rangefunc bool
	sp        uintptr // SP of the deferring function's frame
	pc        uintptr
	fn        func()
	link      *deferRecord
	head      unsafe.Pointer
}

// DeferOffsets calls yield with the frame SP of each defer record linked
// from g, innermost first, until yield returns false. The SP is given as an
// offset below g's stack top, computed where it is read, so that it stays
// right if the stack moves while yield runs. Open-coded defers have no
// record; defers in loops, and every defer in code built with -N, do.
func (g *G) DeferOffsets(yield func(off uintptr) bool) {
	for d := (*deferRecord)(g.Defer); d != nil; d = d.link {
		if !yield(g.StackHi - d.sp) {
			return
		}
	}
}
