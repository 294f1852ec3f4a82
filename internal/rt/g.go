//go:build go1.25 && !go1.27 && !wasm

package rt

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// G mirrors the prefix of runtime.g that weft reads, identical in Go 1.25
// and 1.26: the goroutine's stack bounds and its innermost panic and defer
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
