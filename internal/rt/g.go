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

// Defer mirrors runtime._defer (identical in Go 1.25, 1.26 and 1.27). A
// record is on the heap (deferproc) or is a stack object of the frame that
// deferred the call (deferprocStack). Verify checks every field weft reads
// or writes against what a goroutine can observe.
type Defer struct {
	Heap      bool           // allocated by deferproc
	Rangefunc bool           // a range-over-func loop body's list
	SP        uintptr        // SP of the deferring function's frame
	PC        uintptr        // where the deferring frame called deferproc
	Fn        func()         // the deferred call; may be a stack closure
	Link      *Defer         // the next older record, on the heap or a stack
	Head      unsafe.Pointer // with Rangefunc: *atomic.Pointer[_defer]
}

// DeferOffsets calls yield with the frame SP of each defer record linked
// from g, innermost first, until yield returns false. The SP is given as an
// offset below g's stack top, computed where it is read, so that it stays
// right if the stack moves while yield runs. Open-coded defers have no
// record; defers in loops, and every defer in code built with -N, do.
func (g *G) DeferOffsets(yield func(off uintptr) bool) {
	for d := (*Defer)(g.Defer); d != nil; d = d.Link {
		if !yield(g.StackHi - d.SP) {
			return
		}
	}
}

// SetDefer makes d the head of g's defer chain. It writes g._defer without
// a write barrier, as the runtime's deferprocStack does: the collector
// marks every record of the chain when it scans the stack, and d must be
// linked already where the collector sees it (a chain or a stack record).
//
//go:nosplit
func (g *G) SetDefer(d uintptr) {
	*(*uintptr)(unsafe.Pointer(&g.Defer)) = d
}
