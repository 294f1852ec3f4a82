//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
	"strings"

	"github.com/weftrt/weft/arch"
)

// FrozenPCs appends to pcs the PCs of c's frames that are frozen in its
// record, innermost first, and returns the extended slice. They are in the
// form runtime.Callers gives: one PC per logical frame, so a frame with
// inlined calls gives a PC for each function inlined into it. On the
// stack-copying backend a mounted continuation keeps, below its return
// barrier, the frames it has not thawed yet: a stack walk of the goroutine
// running it (runtime.Callers, the CPU profiler) stops at the barrier
// (IsBarrierPC), and these are the frames that belong under it. The
// portable backend freezes nothing and appends none.
//
// Only the goroutine running c, or one that holds c suspended and owns its
// next Run (a scheduler's carrier about to resume it), may call it: a
// concurrent thaw would change the frames it reads. Profilers use it
// (package vtprof).
func (c *Cont) FrozenPCs(pcs []uintptr) []uintptr {
	if !useStackCopy {
		return pcs
	}
	for _, f := range c.stack.chunk.frames() {
		pcs = f.d.fn.LogicalPCs(f.pc, pcs)
	}
	return pcs
}

// barrierPrefix is the name prefix shared by the return barrier's
// functions (arch.Thaw and the entry points it returns through).
var barrierPrefix = strings.TrimSuffix(runtime.FuncForPC(arch.ThawPC()).Name(), "Thaw") + "thaw"

// IsBarrierPC reports whether pc, a PC of a stack walk, is in the
// stack-copying backend's return barrier: the frame that a thawed
// continuation's outermost live frame returns into, below which the stack
// walk goes on at the continuation's caller rather than at its frozen
// frames (FrozenPCs). Always false on the portable backend.
func IsBarrierPC(pc uintptr) bool {
	if !useStackCopy {
		return false
	}
	f := runtime.FuncForPC(pc - 1)
	if f == nil {
		return false
	}
	name := f.Name()
	return len(name) >= len(barrierPrefix) && strings.EqualFold(name[:len(barrierPrefix)], barrierPrefix)
}
