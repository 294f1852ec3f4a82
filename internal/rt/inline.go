//go:build go1.25 && !go1.28 && !wasm

package rt

import "unsafe"

// inlinedCall mirrors runtime.inlinedCall (runtime/symtabinl.go), identical
// in Go 1.25, 1.26 and 1.27: one node of a function's inline tree.
type inlinedCall struct {
	funcID    uint8
	_         [3]byte
	nameOff   int32
	parentPc  int32 // offset from entry of an instruction at the call site
	startLine int32
}

// LogicalPCs appends to out the PCs of the logical frames of the physical
// frame that continues at pc (a return address), innermost first, in the
// form runtime.Callers gives them: pc itself for the innermost, and for
// each function the compiler inlined it into, one past the PC of the call
// site. runtime.CallersFrames turns each into one frame. Like
// runtime.Callers, it leaves out compiler-generated wrappers (method
// values, promoted methods), physical or inlined.
func (f Func) LogicalPCs(pc uintptr, out []uintptr) []uintptr {
	tree := f.FuncData(FUNCDATAInlTree)
	ix := int32(-1)
	if tree != nil {
		ix = f.PCData(PCDATAInlTreeIndex, pc-1)
	}
	// The innermost logical frame is the inlined function at ix, or the
	// physical function itself.
	innermostID := f.FuncID()
	if ix >= 0 {
		innermostID = inlineCall(tree, ix).funcID
	}
	if innermostID != FuncIDWrapper {
		out = append(out, pc)
	}
	entry := f.Entry()
	for ix >= 0 {
		call := inlineCall(tree, ix)
		parent := entry + uintptr(call.parentPc)
		ix = f.PCData(PCDATAInlTreeIndex, parent)
		id := f.FuncID() // the caller: inlined at ix, or the physical function
		if ix >= 0 {
			id = inlineCall(tree, ix).funcID
		}
		if id != FuncIDWrapper {
			out = append(out, parent+1)
		}
	}
	return out
}

func inlineCall(tree unsafe.Pointer, ix int32) *inlinedCall {
	return (*inlinedCall)(unsafe.Add(tree, uintptr(ix)*unsafe.Sizeof(inlinedCall{})))
}
