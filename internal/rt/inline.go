//go:build go1.25 && !go1.27 && !wasm

package rt

import "unsafe"

// inlinedCall mirrors runtime.inlinedCall (runtime/symtabinl.go), identical
// in Go 1.25 and 1.26: one node of a function's inline tree.
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
// site. runtime.CallersFrames turns each into one frame.
func (f Func) LogicalPCs(pc uintptr, out []uintptr) []uintptr {
	out = append(out, pc)
	tree := f.FuncData(FUNCDATAInlTree)
	if tree == nil {
		return out
	}
	entry := f.Entry()
	for ix := f.PCData(PCDATAInlTreeIndex, pc-1); ix >= 0; {
		call := (*inlinedCall)(unsafe.Add(tree, uintptr(ix)*unsafe.Sizeof(inlinedCall{})))
		parent := entry + uintptr(call.parentPc)
		out = append(out, parent+1)
		ix = f.PCData(PCDATAInlTreeIndex, parent)
	}
	return out
}
