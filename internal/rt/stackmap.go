package rt

import (
	"fmt"
	"unsafe"
)

// Bitvector is one of the runtime's pointer bitmaps: bit i set means word i
// of the area it covers holds a live pointer (runtime.bitvector).
type Bitvector struct {
	N    int32 // number of words covered
	data *uint8
}

// Ptr reports whether word i holds a live pointer.
func (b Bitvector) Ptr(i int32) bool {
	if i < 0 || i >= b.N {
		return false
	}
	return *(*uint8)(unsafe.Add(unsafe.Pointer(b.data), i/8))>>(i%8)&1 != 0
}

// stackmap mirrors runtime.stackmap: n bitmaps of nbit bits each, each
// starting on a byte boundary.
type stackmap struct {
	n        int32
	nbit     int32
	bytedata [1]byte
}

func (m *stackmap) data(i int32) Bitvector {
	return Bitvector{N: m.nbit, data: (*uint8)(unsafe.Add(unsafe.Pointer(&m.bytedata[0]), uintptr(i*((m.nbit+7)>>3))))}
}

// StackObject describes a stack object: a local whose address is taken,
// which the GC scans (through its own pointer mask) only if a live pointer
// in the stack reaches it (runtime.stackObjectRecord).
type StackObject struct {
	// Off is the object's offset in the frame: from varp if negative,
	// from argp otherwise.
	Off       int32
	Size      int32
	PtrBytes  int32 // bytes of the object that may hold pointers
	gcdataoff uint32
}

// PtrMask returns the object's pointer mask, one bit per word over its
// first PtrBytes bytes. rodata is that of the module the record came from.
func (o *StackObject) PtrMask(f Func) Bitvector {
	return Bitvector{N: o.PtrBytes / int32(unsafe.Sizeof(uintptr(0))), data: (*uint8)(unsafe.Add(f.datap.rodata, o.gcdataoff))}
}

// StackMap is what the GC knows of a frame that continues at a PC: the
// live pointer words of its locals area (ending at varp) and of its
// arguments area (starting at argp), and its stack objects.
type StackMap struct {
	Locals  Bitvector
	Args    Bitvector
	Objects []StackObject
}

// ErrNoStackMap is wrapped by StackMapAt's error when a frame cannot be
// described: no pointer maps (assembly), or an argument size only known at
// run time (reflect call frames).
var ErrNoStackMap = fmt.Errorf("frame has no stack map")

// StackMapAt returns the stack map of a frame of f that continues at pc,
// whose locals area (between its SP and varp) is localsSize bytes, exactly
// as runtime.stkframe.getStackMap computes it for an ordinary frame.
func (f Func) StackMapAt(pc uintptr, localsSize uintptr) (StackMap, error) {
	var m StackMap
	idx := int32(-1)
	if pc != f.Entry() {
		// Back up to the CALL: the map at a return address is the call's.
		idx = f.PCData(PCDATAStackMapIndex, pc-1)
	}
	if idx == -1 {
		idx = 0 // prologue: the entry map
	}
	if localsSize > minFrameSize {
		sm := (*stackmap)(f.FuncData(FUNCDATALocalsPointerMaps))
		if sm == nil || sm.n <= 0 {
			return m, fmt.Errorf("%s: %w for its %d bytes of locals", f.Name(), ErrNoStackMap, localsSize)
		}
		if sm.nbit > 0 {
			if idx < 0 || idx >= sm.n {
				return m, fmt.Errorf("%s: stack map index %d of %d at pc %#x: %w", f.Name(), idx, sm.n, pc, ErrNoStackMap)
			}
			m.Locals = sm.data(idx)
		}
	}
	if f.f.args == argsSizeUnknown {
		return m, fmt.Errorf("%s: argument size known only at run time (a reflect call frame): %w", f.Name(), ErrNoStackMap)
	}
	if n := f.f.args / int32(unsafe.Sizeof(uintptr(0))); n > 0 {
		sm := (*stackmap)(f.FuncData(FUNCDATAArgsPointerMaps))
		if sm == nil || sm.n <= 0 {
			return m, fmt.Errorf("%s: %w for its %d bytes of arguments", f.Name(), ErrNoStackMap, f.f.args)
		}
		if idx < 0 || idx >= sm.n {
			return m, fmt.Errorf("%s: argument map index %d of %d at pc %#x: %w", f.Name(), idx, sm.n, pc, ErrNoStackMap)
		}
		if sm.nbit > 0 {
			m.Args = sm.data(idx)
		}
	}
	if p := f.FuncData(FUNCDATAStackObjects); p != nil {
		n := *(*uintptr)(p)
		m.Objects = unsafe.Slice((*StackObject)(unsafe.Add(p, unsafe.Sizeof(uintptr(0)))), int(n))
	}
	return m, nil
}

// argsSizeUnknown is internal/abi.ArgsSizeUnknown.
const argsSizeUnknown = -0x80000000
