//go:build amd64 && !race && !msan && !asan

package weft

import (
	"strings"
	"sync/atomic"

	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// A frameDesc is everything freeze needs to know about a frame that
// continues at one PC: its size, how it pins, and where its live pointers
// are. It depends only on the PC, so descriptors are cached per PC and
// immutable once published. It is decoded from the runtime's tables
// (findfunc, pcsp, the stack map index, pointer maps and stack objects).
type frameDesc struct {
	pc    uintptr // return address the frame continues at
	entry uintptr // entry PC of its function
	fn    rt.Func

	// size is FP - SP: the frame's locals, outgoing arguments, saved BP
	// and the return address its caller pushed.
	size uint32
	// bad is true if the frame cannot be described or unwound through
	// (no function, no SP delta); pinned/reason say whether it pins.
	bad    bool
	pinned bool
	reason pinning.Reason
	// mapErr is set if its stack maps cannot be read; such a frame pins
	// with UnknownFrame.
	mapErr bool
	goexit bool // runtime.goexit: the bottom of a goroutine
	// engine: the function is weft's own (the engine, package
	// continuation or package scheduler): the frames a yield adds
	// above the code that yields, which the thaw policy does not count.
	engine bool
	// yield: the function is weft.Yield, whose frame a capture leaves
	// out (capture's skip).
	yield bool
	// stop is bad || pinned || mapErr || goexit: the walk cannot go on
	// through the frame (unless it is the boundary).
	stop bool
	args int32 // bytes of arguments (in the caller's frame)

	// hasBP: the frame saves its caller's BP just below the return address.
	hasBP bool
	// locals covers the words ending at localsEnd bytes above SP; args the
	// words starting at size bytes above SP (the caller's outgoing area).
	locals    rt.Bitvector
	localsEnd uint32
	argMap    rt.Bitvector
	// objs are the frame's stack objects, offsets relative to SP.
	objs []descObject
	// ptrOffs lists the byte offsets from SP of the words the locals and
	// argument maps mark live, in that order: what a region without stack
	// objects publishes, with no bitmaps.
	ptrOffs []uint32
	// deferAt is the byte offset from SP of the frame's open-coded defer
	// bits (nonzero while a deferred call is pending), or -1 if its
	// function has no open-coded defers.
	deferAt int32
}

type descObject struct {
	off  int64 // from SP; may lie in the caller's frame (argument objects)
	size uint32
	mask rt.Bitvector
}

// descCacheBits sizes the descriptor cache: 4,096 direct-mapped entries.
const descCacheBits = 12

// descCache maps a PC to its descriptor. It is direct-mapped and lock free:
// a lookup is one atomic load and a compare; a collision overwrites the
// older entry, which is recomputed when next needed. Entries are immutable,
// so a racing reader sees either a whole old descriptor or a whole new one.
// It holds only facts about the binary's code, which never change while
// the process runs, so there is nothing a user would need to reset.
var descCache [1 << descCacheBits]atomic.Pointer[frameDesc]

func descSlot(pc uintptr) *atomic.Pointer[frameDesc] {
	return &descCache[(uint64(pc)*0x9E3779B97F4A7C15)>>(64-descCacheBits)]
}

// descFor returns the descriptor of a frame continuing at pc.
func descFor(pc uintptr) *frameDesc {
	if d := descSlot(pc).Load(); d != nil && d.pc == pc {
		return d
	}
	return descMiss(pc)
}

//go:noinline
func descMiss(pc uintptr) *frameDesc {
	d := decodeDesc(pc)
	d.stop = d.bad || d.pinned || d.mapErr || d.goexit
	descSlot(pc).Store(d)
	return d
}

// decodeDesc reads a frame's description from the runtime's tables.
func decodeDesc(pc uintptr) *frameDesc {
	d := &frameDesc{pc: pc, deferAt: -1}
	f := rt.FindFunc(pc)
	if !f.Valid() {
		d.bad = true
		return d
	}
	d.fn, d.entry = f, f.Entry()
	d.engine = enginePackage(f.Name())
	d.yield = f.Name() == yieldName
	delta := f.SPDelta(pc)
	if delta < 0 {
		d.bad = true
		return d
	}
	d.size = uint32(delta) + 8 // plus the return address
	d.goexit = f.FuncID() == rt.FuncIDGoexit
	d.args = f.Args()
	d.reason, d.pinned = pinning.FrameReason(pc)

	// The frame geometry of rt.Frame, relative to SP.
	localsEnd := d.size - 8 // below the return address
	if localsEnd > 0 {
		localsEnd -= 8 // the saved BP
		d.hasBP = true
	}
	d.localsEnd = localsEnd
	if off, ok := f.DeferBitsOffset(); ok {
		if !d.hasBP || off == 0 || off > localsEnd {
			// Deferred calls whose state cannot be found: a panic
			// crossing the return barrier could not tell whether they
			// must run, so such a frame is never frozen.
			d.mapErr = true
			return d
		}
		d.deferAt = int32(localsEnd - off) // varp is the saved-BP slot
	}
	m, err := f.StackMapAt(pc, uintptr(localsEnd))
	if err != nil {
		d.mapErr = true
		return d
	}
	d.locals, d.argMap = m.Locals, m.Args
	for j := int32(0); j < m.Locals.N; j++ {
		if m.Locals.Ptr(j) {
			d.ptrOffs = append(d.ptrOffs, localsEnd-uint32(m.Locals.N-j)*8)
		}
	}
	for j := int32(0); j < m.Args.N; j++ {
		if m.Args.Ptr(j) {
			d.ptrOffs = append(d.ptrOffs, d.size+uint32(j)*8)
		}
	}
	for k := range m.Objects {
		o := &m.Objects[k]
		off := int64(d.size) + int64(o.Off) // relative to argp = FP
		if o.Off < 0 {
			off = int64(localsEnd) + int64(o.Off)
		}
		d.objs = append(d.objs, descObject{off: off, size: uint32(o.Size), mask: o.PtrMask(f)})
	}
	return d
}

// yieldPathNames are the names of the engine's functions on the yield path
// besides Yield, and the prefixes those of packages continuation and
// scheduler (see modulePath).
var (
	yieldPathNames     = [...]string{enginePrefix + "yieldReturn", enginePrefix + "(*Cont).freezeNested", enginePrefix + "stackYield"}
	continuationPrefix = modulePath + "/continuation."
	schedulerPrefix    = modulePath + "/scheduler."
)

// enginePackage reports whether the function named fn is one of weft's
// own that a yield runs above the code that yields: the engine's yield
// path, or anything in package continuation or package scheduler. That
// includes those packages' own tests (package scheduler's functions are
// named scheduler.…); tests of the thaw policy live in the external test
// packages (scheduler_test.…), whose functions are not the engine's.
func enginePackage(fn string) bool {
	switch fn {
	case yieldName, yieldPathNames[0], yieldPathNames[1], yieldPathNames[2]:
		return true
	}
	return strings.HasPrefix(fn, continuationPrefix) || strings.HasPrefix(fn, schedulerPrefix)
}
