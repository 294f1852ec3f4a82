//go:build amd64 && !race && !msan && !asan

package arch

import (
	"unsafe"

	"github.com/weftrt/weft/internal/thawstat"
)

// The stack-copying backend's control transfers on amd64, in
// switch_amd64.s. The engine freezes a continuation's frames into a heap
// chunk of records, discards them with JumpBack, and later has Thaw copy
// them back, a record at a time, on any goroutine.
//
// The stack of a goroutine running a resumed continuation:
//
//	caller of Run ... Enter            (JumpBack returns from Enter's call)
//	the engine's host frames           (Go, with a deferred call for panics)
//	Thaw                               (the return barrier)
//	the frames of the last record thawed, outermost first
//
// The outermost frame of every record thawed returns into Thaw, at
// BarrierPC. Thaw then copies the next record beneath itself and jumps
// into it, with the result registers of the frame that returned. With no
// records left, it returns.

// Link is the part of a continuation's chunk that the assembly reads and
// writes. The engine embeds it first in its chunk.
//
// The chunk's records lie in Mem, the innermost last, in its first MemTop
// words. The last RecordHeaderWords words of a record are its header
// (RecordHeader, in record_amd64.go). A record holds the image of a run of
// frames, innermost first, then its tables as uint32s. The tables give
// the word index of each of its NP pointers, then NR (word index, byte
// offset) pairs of references into the record. The record's pointers are
// the last NP of the PtrTop in Ptrs.
type Link struct {
	// TopOff is Enter's SP as an offset below the goroutine's stack top,
	// set by Enter on every call: JumpBack returns there.
	TopOff uintptr
	Mem    unsafe.Pointer // *uintptr
	MemTop uintptr
	Ptrs   unsafe.Pointer // *unsafe.Pointer
	PtrTop uintptr
	// Thawed counts what Thaw has copied: frames<<32 | image words.
	// Whoever reads it must zero it at least once per mount; a mount
	// thaws each record once at most, and a goroutine stack (1 GB at
	// most) holds fewer than 1<<32 words, so the words never carry into
	// the frames.
	Thawed uintptr
}

// ThawHeadroom is the stack Thaw leaves free below thawed frames: more than
// a chain of NOSPLIT functions may use (the runtime's StackGuard).
const ThawHeadroom = 2048

// Enter records its SP in l.TopOff and calls fn in a frame that fn's frames
// return into. It is the boundary of a continuation's region when the body
// was called directly; JumpBack returns from it. fn is called with l in the
// first integer argument register of ABIInternal (AX): a func(*Link),
// converted to a func(), is called as fn(l), with no closure to make.
//
//go:noescape
func Enter(l *Link, fn func())

// Thaw copies l's last record beneath its own frame and continues the
// record's innermost frame. With rethrow 0, the frame continues as if its
// call had returned ret in the first result register and zeros in the
// others. A nil ret is a nil error, as a capture returns; weft passes a
// resumed Yield's first result so. Otherwise rethrow is the ABIInternal
// entry of a function without arguments. The frame continues by calling
// it, as if it had called it there. If it returns, the frame continues
// with its results in the result registers (weft's yieldReturn makes
// Yield's results so).
//
// The record's outermost frame returns into Thaw, which thaws the next
// record the same way, with the result registers that frame returned.
// Thaw returns when a frame returns into it and l has no records left. A
// stack too small for a record is grown without a safe point at which the
// runtime could scan it (growPinned).
//
//go:noescape
func Thaw(l *Link, rethrow uintptr, ret unsafe.Pointer)

// RelinkDefers links the runtime defer records that l's last record
// carries (RecordMoved) into the goroutine's defer chain. sp is Thaw's SP:
// the record's frames will lie just beneath it. Thaw calls it, by
// ABIInternal, before it copies the record, once the record fits. It runs
// between a frame's return into Thaw and the copy, where result registers
// saved in Thaw's frame may hold pointers the collector cannot see. So it
// must be nosplit and call nothing that reaches a safe point. The engine
// sets it once, before it writes any record with RecordMoved.
var RelinkDefers func(l *Link, sp uintptr)

// JumpBack discards every frame below Enter's (whose SP is topOff below the
// goroutine's stack top) and returns from Enter's call of its body.
//
//go:noescape
func JumpBack(topOff uintptr)

// thawPop, thawShort: see switch_amd64.s. They are never called from Go.
func thawPop()
func thawShort()

// StackRoom returns how many bytes of stack the calling goroutine has
// below its caller's frame. It is assembly: in Go it needs a call to
// GPointer and a frame of its own.
func StackRoom() uintptr

// EnterPC returns the entry PC of Enter: the boundary of a region whose
// body was called directly.
func EnterPC() uintptr

// ThawPC returns the entry PC of Thaw: the boundary of a region thawed from
// a chunk.
func ThawPC() uintptr

// growPinned grows the goroutine's stack to have n bytes below the
// caller's frame. Nothing may scan the stack meanwhile. Thaw calls it when
// a record does not fit, and holds the result registers of a frame that
// returned into it: the collector cannot see their pointers. growPinned is
// nosplit, so it has no stack check, and every instruction is an unsafe
// point: no asynchronous preemption either. It raises m.locks before it
// calls anything that may grow the stack. newstack then refuses to
// preempt, and the collector, which must stop the goroutine to scan it,
// waits.
//
//go:nosplit
func growPinned(n uintptr) {
	thawstat.Grown.Add(1) // intrinsic: no call
	procPin()
	GrowStack(n)
	procUnpin()
}

// GrowStack grows the goroutine's stack to at least n bytes below the
// caller's frame, the ordinary way, by calling down. Its result means
// nothing; it keeps the frames from being optimized away.
//
//go:noinline
func GrowStack(n uintptr) byte {
	var pad [1024]byte
	if n <= uintptr(len(pad)) {
		return pad[0]
	}
	return GrowStack(n-uintptr(len(pad))) + pad[n%uintptr(len(pad))]
}

// procPin and procUnpin raise and lower m.locks (runtime.procPin is kept
// for linkname by the runtime, go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
