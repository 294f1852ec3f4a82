package rt

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// Frame is one physical frame of a goroutine stack, laid out as on amd64:
// SP at the bottom; the saved frame pointer (if the frame has a body) and
// the return address at the top; FP, the caller's SP, just above.
type Frame struct {
	Fn Func
	// PC is where the frame continues: the return address of its call into
	// the frame below, or the current PC of the innermost frame.
	PC uintptr
	SP unsafe.Pointer
	FP unsafe.Pointer
}

// FrameAt describes the frame of the function running at pc whose SP is
// sp. It is invalid (Fn invalid) if pc is not in Go code or the function's
// SP delta at pc is unknown.
func FrameAt(pc uintptr, sp unsafe.Pointer) Frame {
	f := FindFunc(pc)
	if !f.Valid() {
		return Frame{PC: pc, SP: sp}
	}
	d := f.SPDelta(pc)
	if d < 0 {
		return Frame{PC: pc, SP: sp}
	}
	return Frame{Fn: f, PC: pc, SP: sp, FP: unsafe.Add(sp, uintptr(d)+arch.FrameLinkSize)}
}

// Caller returns the frame this frame returns into.
func (fr Frame) Caller() Frame {
	return FrameAt(*(*uintptr)(unsafe.Add(fr.FP, -arch.FrameLinkSize)), fr.FP)
}

// VarP returns the top of the frame's locals area: below the return
// address and, if the frame has a body, below the saved frame pointer.
func (fr Frame) VarP() unsafe.Pointer {
	varp := unsafe.Add(fr.FP, -arch.FrameLinkSize)
	if uintptr(varp) > uintptr(fr.SP) {
		varp = unsafe.Add(varp, -arch.FrameLinkSize) // saved BP
	}
	return varp
}

// ArgP returns the start of the frame's arguments area, in its caller's
// frame.
func (fr Frame) ArgP() unsafe.Pointer { return unsafe.Add(fr.FP, minFrameSize) }

// StackMap returns the frame's stack map at its PC.
func (fr Frame) StackMap() (StackMap, error) {
	return fr.Fn.StackMapAt(fr.PC, uintptr(fr.VarP())-uintptr(fr.SP))
}
