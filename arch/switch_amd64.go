//go:build amd64 && !race && !msan && !asan

package arch

import "unsafe"

// The stack-copying backend's control transfers on amd64, in
// switch_amd64.s. The engine freezes a continuation's frames (everything
// below an Enter frame) into a heap chunk, discards them with JumpBack, and
// later has Enter copy them back, on any goroutine, and jump into them.

// ThawPlan is what Enter's thaw path reads: where the chunk's arrays are and
// where the innermost frame continues. The engine fills it in, in the frame
// that calls Enter.
type ThawPlan struct {
	Words   unsafe.Pointer // the region's image, N words
	N       uintptr
	Ptrs    unsafe.Pointer // NP live pointers out of the stack, or nil
	PtrAt   unsafe.Pointer // NP uint32 word indexes, where each pointer goes
	NP      uintptr
	Refs    unsafe.Pointer // NR (word index, byte offset) uint32 pairs, or nil
	NR      uintptr
	OuterBP uintptr // word index of the outermost frame's saved BP, or ^0
	BP0     uintptr // byte offset of the innermost frame's saved-BP slot
	PC0     uintptr // where the innermost frame continues
	// Short is set by Enter when the goroutine's stack has too little room
	// below Enter's frame: it then returns without thawing, and the caller
	// grows the stack and tries again.
	Short uintptr
}

// ThawHeadroom is the stack Enter leaves free below thawed frames: more than
// a chain of NOSPLIT functions may use (the runtime's StackGuard).
const ThawHeadroom = 2048

// Enter calls fn in a frame that fn's frames return into; or, if thaw,
// copies plan's chunk below that frame and jumps into its innermost frame,
// as if that frame's call had returned a nil error (AX = BX = 0), so that
// the thawed frames return into Enter instead. ctx is not read; it is
// there so that the frame layout is the engine's to choose.
//
// Both paths run in the one frame, so the outermost frozen frame's return
// address is valid on every goroutine. The room check happens in assembly
// after the last safe point: the runtime may shrink a stack at any
// function prologue, so growing it beforehand proves nothing on its own.
//
//go:noescape
func Enter(ctx unsafe.Pointer, fn func(), thaw bool, plan *ThawPlan)

// JumpBack discards every frame below Enter's (whose SP is topOff below the
// goroutine's stack top) and returns from Enter's call of the body.
//
//go:noescape
func JumpBack(topOff uintptr)

// jump is the end of Enter's thaw path: it sets SP and BP and jumps into
// the innermost thawed frame. It is never called, and never on a stack.
func jump()

// EnterPC returns the entry PC of Enter: the boundary of every region.
func EnterPC() uintptr
