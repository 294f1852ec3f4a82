// Package rt reads the Go runtime's function metadata, the same tables the
// runtime uses to unwind, scan and copy goroutine stacks: function bounds
// and names, the SP delta at each PC (pcsp), the PCDATA tables (stack map
// index, unsafe points) and the FUNCDATA (pointer maps, stack objects).
//
// The stack-copying backend needs these to walk and copy frames. The
// runtime exports none of them: findfunc is reachable through linkname
// (it is on the runtime's list of symbols that widely used packages link
// to), and the rest is decoded here from mirrors of runtime._func and
// runtime.moduledata, exactly as runtime/symtab.go decodes them. The
// mirrors are written for Go 1.25, 1.26 and 1.27; on any other release, and on
// wasm (whose PCs are not addresses), the package reports itself
// unsupported, links to nothing, and its lookups find nothing. Verify checks, at run time, that the
// mirrors agree with the runtime's own answers.
package rt

import (
	"unsafe"
)

// PCDATA tables and FUNCDATA indexes (internal/abi/symtab.go).
const (
	PCDATAUnsafePoint   = 0
	PCDATAStackMapIndex = 1
	PCDATAInlTreeIndex  = 2
	PCDATAArgLiveIndex  = 3

	FUNCDATAArgsPointerMaps    = 0
	FUNCDATALocalsPointerMaps  = 1
	FUNCDATAStackObjects       = 2
	FUNCDATAInlTree            = 3
	FUNCDATAOpenCodedDeferInfo = 4
	FUNCDATAArgInfo            = 5
	FUNCDATAArgLiveInfo        = 6
	FUNCDATAWrapInfo           = 7
)

// Function flags (internal/abi.FuncFlag).
const (
	FlagTopFrame = 1 << 0 // the top of a stack: goexit, mstart
	FlagSPWrite  = 1 << 1 // writes SP arbitrarily; cannot be unwound through
	FlagAsm      = 1 << 2 // written in assembly
)

// Func is the metadata of one function, as runtime.funcInfo holds it. The
// zero Func is invalid.
type Func struct {
	f     *_func
	datap *moduledata
}

// _func mirrors runtime._func (runtime/runtime2.go), identical in Go 1.25,
// 1.26 and 1.27. It lives in read-only static data.
type _func struct {
	entryOff    uint32 // start pc, as offset from moduledata.text
	nameOff     int32  // function name, as index into moduledata.funcnametab
	args        int32  // in/out args size
	deferreturn uint32 // offset of a deferreturn call instruction from entry, if any
	pcsp        uint32
	pcfile      uint32
	pcln        uint32
	npcdata     uint32
	cuOffset    uint32
	startLine   int32
	funcID      uint8
	flag        uint8
	_           [1]byte
	nfuncdata   uint8 // followed by npcdata uint32s and nfuncdata uint32s
}

// Valid reports whether f describes a function.
func (f Func) Valid() bool { return f.f != nil }

// Entry returns the function's entry PC.
func (f Func) Entry() uintptr { return f.datap.textAddr(f.f.entryOff) }

// Name returns the function's symbol name, as runtime.FuncForPC reports it.
func (f Func) Name() string {
	if f.f.nameOff == 0 {
		return ""
	}
	tab := f.datap.funcnametab[f.f.nameOff:]
	n := 0
	for n < len(tab) && tab[n] != 0 {
		n++
	}
	return unsafe.String(unsafe.SliceData(tab), n)
}

// Args returns the size of the function's arguments and results, in bytes.
func (f Func) Args() int32 { return f.f.args }

// Deferreturn returns the offset from the entry of the function's
// deferreturn call, or 0 if it has none.
func (f Func) Deferreturn() uint32 { return f.f.deferreturn }

// FuncID returns the runtime's identifier for special functions (0 for an
// ordinary function).
func (f Func) FuncID() uint8 { return f.f.funcID }

// Flag returns the function's flags (FlagTopFrame, FlagSPWrite, FlagAsm).
func (f Func) Flag() uint8 { return f.f.flag }

// SPDelta returns the size of the function's frame at pc: the distance from
// SP at pc to SP at entry (runtime.funcspdelta). It is -1 if unknown.
func (f Func) SPDelta(pc uintptr) int32 {
	v, _ := f.pcvalue(f.f.pcsp, pc)
	return v
}

// PCData returns the value of PCDATA table at pc, or -1 if the function
// has no such table (runtime.pcdatavalue).
func (f Func) PCData(table uint32, pc uintptr) int32 {
	if table >= f.f.npcdata {
		return -1
	}
	v, _ := f.pcvalue(f.pcdatastart(table), pc)
	return v
}

// FuncData returns the ith FUNCDATA of the function, or nil
// (runtime.funcdata).
func (f Func) FuncData(i uint8) unsafe.Pointer {
	if i >= f.f.nfuncdata {
		return nil
	}
	off := *(*uint32)(unsafe.Add(unsafe.Pointer(&f.f.nfuncdata), unsafe.Sizeof(f.f.nfuncdata)+uintptr(f.f.npcdata)*4+uintptr(i)*4))
	if off == ^uint32(0) {
		return nil
	}
	return unsafe.Add(f.datap.gofunc, off)
}

func (f Func) pcdatastart(table uint32) uint32 {
	return *(*uint32)(unsafe.Add(unsafe.Pointer(&f.f.nfuncdata), unsafe.Sizeof(f.f.nfuncdata)+uintptr(table)*4))
}

// pcvalue decodes the pc-value table at offset off in pctab and returns the
// value at targetpc and the PC where that value starts (runtime.pcvalue,
// without its cache).
func (f Func) pcvalue(off uint32, targetpc uintptr) (int32, uintptr) {
	if off == 0 {
		return -1, 0
	}
	p := f.datap.pctab[off:]
	entry := f.Entry()
	pc := entry
	prevpc := pc
	val := int32(-1)
	for {
		var ok bool
		p, ok = step(p, &pc, &val, pc == entry)
		if !ok {
			break
		}
		if targetpc < pc {
			return val, prevpc
		}
		prevpc = pc
	}
	return -1, 0
}

// step advances to the next pc, value pair in an encoded pc-value table
// (runtime.step).
func step(p []byte, pc *uintptr, val *int32, first bool) ([]byte, bool) {
	uvdelta := uint32(p[0])
	if uvdelta == 0 && !first {
		return nil, false
	}
	n := uint32(1)
	if uvdelta&0x80 != 0 {
		n, uvdelta = readvarint(p)
	}
	*val += int32(-(uvdelta & 1) ^ (uvdelta >> 1))
	p = p[n:]
	pcdelta := uint32(p[0])
	n = 1
	if pcdelta&0x80 != 0 {
		n, pcdelta = readvarint(p)
	}
	p = p[n:]
	*pc += uintptr(pcdelta * pcQuantum)
	return p, true
}

func readvarint(p []byte) (read uint32, val uint32) {
	var v, shift, n uint32
	for {
		b := p[n]
		n++
		v |= uint32(b&0x7F) << (shift & 31)
		if b&0x80 == 0 {
			break
		}
		shift += 7
	}
	return n, v
}

// textAddr converts an offset from the module's text start to a PC
// (runtime.moduledata.textAddr). Modules with several text sections are
// refused by Verify, so one section is all this handles.
func (md *moduledata) textAddr(off uint32) uintptr { return md.text + uintptr(off) }

// textsect mirrors runtime.textsect.
type textsect struct {
	vaddr, end, baseaddr uintptr
}

// functab mirrors runtime.functab.
type functab struct {
	entryoff, funcoff uint32
}

// DeferBitsOffset returns where a frame of the function keeps the bits of
// its open-coded deferred calls that are pending: that many bytes below
// the frame's varp (its saved-BP slot), as runtime.(*_panic).nextFrame
// reads it. ok is false if the function has no open-coded defers.
func (f Func) DeferBitsOffset() (off uint32, ok bool) {
	p := f.FuncData(FUNCDATAOpenCodedDeferInfo)
	if p == nil {
		return 0, false
	}
	_, v := readvarint(unsafe.Slice((*byte)(p), 5))
	return v, true
}
