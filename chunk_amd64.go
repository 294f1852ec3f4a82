//go:build amd64 && !race

package weft

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file is the copying half of freeze for the stack-copying backend:
// capture copies the frames between a yield point and a boundary frame into
// a stackChunk, the way invariants 1 to 4 of the design brief require, and
// reports a pinning reason instead when the region cannot be moved. It
// leaves the frames in place; discarding them (the jump back to the entry
// trampoline) and thawing them elsewhere are the next steps, not built yet.

const wordSize = unsafe.Sizeof(uintptr(0))

// stackChunk is a frozen region of a goroutine stack, like Loom's stack
// chunk: two heap arrays, scalar words and live pointers, plus what is
// needed to put the frames back at another address.
type stackChunk struct {
	// words is the region's image, lowest address first, one word per
	// stack word. Words that held live pointers or pointers into the region
	// are zeroed here: those live in ptrs and refs. Dead pointer slots keep
	// their stale values as plain integers, which the GC never follows.
	words []uintptr
	// ptrs holds the region's live pointers to memory outside the stack
	// (heap and static data), each published to the GC exactly once;
	// ptrAt[i] is the word index ptrs[i] came from.
	ptrs  []unsafe.Pointer
	ptrAt []uint32
	// refs are the words that held pointers into the region itself: saved
	// frame pointers and pointers to stack locals, as byte offsets from the
	// region's base, to be relocated at thaw.
	refs []stackRef
	// frames describes each frame, innermost first.
	frames []chunkFrame
	// outerBP is the word index of the outermost frame's saved frame
	// pointer, which points into the boundary frame and is patched at thaw;
	// -1 if that frame saves none.
	outerBP int32
	// cleared are the pointer words of stack objects no live pointer
	// reaches that held an address in the stack outside the region:
	// garbage, which the image holds as zero rather than as an address
	// that would dangle once the frames are thawed elsewhere.
	cleared []uint32
	// topOff is the region's top (the boundary frame's SP) as an offset
	// below the goroutine's stack top: where the jump back lands, however
	// the stack has moved since.
	topOff uintptr
}

type stackRef struct {
	at     uint32 // word index in the chunk
	target uint32 // byte offset from the region's base
}

type chunkFrame struct {
	pc     uintptr // where the frame continues
	sp, fp uint32  // byte offsets of its SP and FP from the region's base
}

// errPinned carries the reason a region cannot be captured and the PC of
// the frame responsible.
type errPinned struct {
	reason pinning.Reason
	pc     uintptr
}

func (e *errPinned) Error() string {
	return fmt.Sprintf("pinned: %v at %s", e.reason, rt.FindFunc(e.pc-1).Name())
}

// capture copies into c the frames from its caller's frame (which
// continues right after this call) up to, not including, the innermost
// frame of the function whose entry PC is boundary. It returns an
// *errPinned if the region cannot be frozen, and another error if the walk
// finds no boundary frame.
//
// The stack may move whenever capture calls anything, so it keeps
// positions either as unsafe.Pointers in its own frame (which the runtime
// relocates with the stack) or as offsets, and compares raw stack addresses
// only with bounds computed in the same stretch of code without calls.
//
//go:noinline
func (c *stackChunk) capture(boundary uintptr) error {
	pc, sp := arch.CallerPCSP()
	fr := rt.FrameAt(pc, sp).Caller() // the innermost frozen frame
	base := fr.SP
	c.frames = c.frames[:0]
	c.ptrs, c.ptrAt, c.refs, c.cleared = c.ptrs[:0], c.ptrAt[:0], c.refs[:0], c.cleared[:0]
	c.outerBP = -1

	// Walk the region, classifying every frame.
	var outer rt.Frame
	for {
		if !fr.Fn.Valid() {
			if len(c.frames) == 0 {
				return errors.New("weft: capture: the caller's frame cannot be described")
			}
			return &errPinned{pinning.UnknownFrame, fr.PC}
		}
		if fr.Fn.Entry() == boundary {
			break
		}
		if r, pinned := pinning.FrameReason(fr.PC); pinned {
			return &errPinned{r, fr.PC}
		}
		c.frames = append(c.frames, chunkFrame{
			pc: fr.PC,
			sp: uint32(uintptr(fr.SP) - uintptr(base)),
			fp: uint32(uintptr(fr.FP) - uintptr(base)),
		})
		outer = fr
		fr = fr.Caller()
		if fr.Fn.Valid() && fr.Fn.FuncID() == rt.FuncIDGoexit {
			return errors.New("weft: capture: no boundary frame on the stack")
		}
	}
	if len(c.frames) == 0 {
		return errors.New("weft: capture: the boundary is the caller itself")
	}
	if outer.Fn.Args() != 0 {
		// Its arguments would live in the boundary frame.
		return fmt.Errorf("weft: capture: outermost frame %s has %d bytes of arguments", outer.Fn.Name(), outer.Fn.Args())
	}
	size := uintptr(c.frames[len(c.frames)-1].fp)
	n := int(size / wordSize)

	// A defer record whose frame lies in the region would dangle.
	g := rt.CurG()
	loOff, hiOff := g.StackHi-uintptr(base), g.StackHi-uintptr(base)-size
	if sp, ok := deferIn(g, loOff, hiOff); ok {
		return &errPinned{pinning.DeferRecord, sp}
	}

	// Which words hold live pointers, by the stack maps at each call site;
	// and the region's stack objects.
	live := make([]uint64, (n+63)/64)
	var objs []chunkObject
	var bps []int
	for i, f := range c.frames {
		fr := rt.Frame{Fn: rt.FindFunc(f.pc), PC: f.pc, SP: unsafe.Add(base, f.sp), FP: unsafe.Add(base, f.fp)}
		m, err := fr.StackMap()
		if err != nil {
			return &errPinned{pinning.UnknownFrame, f.pc}
		}
		varp := uintptr(fr.VarP()) - uintptr(base)
		for j := int32(0); j < m.Locals.N; j++ {
			if m.Locals.Ptr(j) {
				setBit(live, int(varp/wordSize)-int(m.Locals.N)+int(j))
			}
		}
		argp := uintptr(fr.ArgP()) - uintptr(base)
		for j := int32(0); j < m.Args.N; j++ {
			if m.Args.Ptr(j) {
				w := int(argp/wordSize) + int(j)
				if w >= n {
					return fmt.Errorf("weft: capture: arguments of %s reach beyond the region", fr.Fn.Name())
				}
				setBit(live, w)
			}
		}
		for k := range m.Objects {
			o := &m.Objects[k]
			at := int64(argp) + int64(o.Off)
			if o.Off < 0 {
				at = int64(varp) + int64(o.Off)
			}
			if at < 0 || at+int64(o.Size) > int64(size) {
				return fmt.Errorf("weft: capture: stack object of %s lies outside the region", fr.Fn.Name())
			}
			objs = append(objs, chunkObject{off: uint32(at), size: uint32(o.Size), mask: o.PtrMask(fr.Fn)})
		}
		// The saved frame pointer, below the return address, if the frame
		// has a body. It is not a Go pointer: it must point into the region
		// (checked below), except the outermost, which points into the
		// boundary frame and is patched at thaw.
		if uintptr(fr.VarP()) < uintptr(fr.FP)-wordSize {
			bp := int((uintptr(f.fp) - 2*wordSize) / wordSize)
			if i == len(c.frames)-1 {
				c.outerBP = int32(bp)
			} else {
				bps = append(bps, bp)
			}
		}
	}

	// Copy the region. No calls from here until the bounds are taken, so
	// the copied values and the bounds describe the same stack position.
	if cap(c.words) < n {
		c.words = make([]uintptr, n)
	}
	c.words = c.words[:n]
	words := c.words
	for i := range words {
		words[i] = *(*uintptr)(unsafe.Add(base, uintptr(i)*wordSize))
	}
	lo, hi := uintptr(base), uintptr(base)+size
	gLo, gHi := g.StackLo, g.StackHi
	c.topOff = gHi - hi

	for _, w := range bps {
		v := words[w]
		if v < lo || v >= hi {
			return &errPinned{pinning.UnknownFrame, c.framePC(uint32(uintptr(w) * wordSize))}
		}
		c.refs = append(c.refs, stackRef{at: uint32(w), target: uint32(v - lo)})
		words[w] = 0
	}

	// Sort the live words into pointers out of the stack and pointers into
	// the region; a pointer into the stack outside the region pins it. Then
	// do the same for every stack object a live pointer reaches.
	done := make([]uint64, len(live))
	var work []int
	for w := 0; w < n; w++ {
		if getBit(live, w) {
			work = append(work, w)
		}
	}
	for len(work) > 0 {
		w := work[len(work)-1]
		work = work[:len(work)-1]
		if getBit(done, w) {
			continue
		}
		setBit(done, w)
		v := words[w]
		switch {
		case v == 0:
		case lo <= v && v < hi:
			c.refs = append(c.refs, stackRef{at: uint32(w), target: uint32(v - lo)})
			words[w] = 0
			for k := range objs {
				o := &objs[k]
				if !o.live && uintptr(o.off) <= v-lo && v-lo < uintptr(o.off+o.size) {
					o.live = true
					for j := int32(0); j < o.mask.N; j++ {
						if o.mask.Ptr(j) {
							work = append(work, int(o.off/uint32(wordSize))+int(j))
						}
					}
				}
			}
		case gLo <= v && v < gHi:
			return &errPinned{pinning.StackPointer, c.framePC(uint32(uintptr(w) * wordSize))}
		default:
			// Re-read the word as a pointer from the live stack: base has
			// followed any move, and a pointer out of the stack is unchanged
			// by one.
			c.ptrs = append(c.ptrs, *(*unsafe.Pointer)(unsafe.Add(base, uintptr(w)*wordSize)))
			c.ptrAt = append(c.ptrAt, uint32(w))
			words[w] = 0
		}
	}

	// Objects no live pointer reaches publish nothing to the GC. Their
	// contents cannot matter as pointers (the GC would not keep their
	// targets alive), but runtime.adjustframe relocates the pointer words
	// of every stack object, live or not, when it copies a stack, so words
	// pointing into the region are relocated here too; words pointing
	// elsewhere in the stack are garbage left by earlier calls, and are
	// zeroed rather than thawed as addresses into another stack.
	for k := range objs {
		o := &objs[k]
		if o.live {
			continue
		}
		for j := int32(0); j < o.mask.N; j++ {
			w := int(o.off/uint32(wordSize)) + int(j)
			if !o.mask.Ptr(j) || getBit(done, w) {
				continue
			}
			setBit(done, w)
			switch v := words[w]; {
			case lo <= v && v < hi:
				c.refs = append(c.refs, stackRef{at: uint32(w), target: uint32(v - lo)})
				words[w] = 0
			case gLo <= v && v < gHi:
				c.cleared = append(c.cleared, uint32(w))
				words[w] = 0
			}
		}
	}
	return nil
}

// chunkObject is a stack object of the region.
type chunkObject struct {
	off, size uint32 // byte offset from the region's base, and size
	mask      rt.Bitvector
	live      bool
}

// framePC returns the PC of the frame holding the byte at offset off.
func (c *stackChunk) framePC(off uint32) uintptr {
	for _, f := range c.frames {
		if off < f.fp {
			return f.pc
		}
	}
	return 0
}

// deferIn reports whether a defer record of g belongs to a frame whose SP
// lies between the offsets loOff and hiOff below g's stack top (loOff is
// the larger), and returns that SP. Offsets, not addresses: this call may
// move the stack.
func deferIn(g *rt.G, loOff, hiOff uintptr) (uintptr, bool) {
	found, at := false, uintptr(0)
	g.DeferSPs(func(sp uintptr) bool {
		off := g.StackHi - sp
		if hiOff < off && off <= loOff {
			found, at = true, sp
			return false
		}
		return true
	})
	return at, found
}

func setBit(b []uint64, i int)      { b[i/64] |= 1 << (i % 64) }
func getBit(b []uint64, i int) bool { return b[i/64]>>(i%64)&1 != 0 }
