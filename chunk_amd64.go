//go:build amd64 && !race && !msan && !asan

package weft

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file is the copying half of freeze for the stack-copying backend:
// capture copies the frames between a yield point and a boundary frame into
// a stackChunk, the way invariants 1 to 4 of the design brief require, and
// reports a pinning reason instead when the region cannot be moved. It
// leaves the frames in place; scYield then discards them by jumping back to
// the entry trampoline (stackcopy_amd64.go).

const wordSize = unsafe.Sizeof(uintptr(0))

// stackChunk is a frozen region of a goroutine stack, like Loom's stack
// chunk: two heap arrays, one of scalar words and one of live pointers,
// plus what is needed to put the frames back at another address.
type stackChunk struct {
	// mem is the region's image, n words, lowest address first, followed
	// by the chunk's offset tables as uint32s: ptrAt (np entries), then
	// refs (nr pairs). In the image, words that held live pointers or
	// pointers into the region are zero: those are in ptrs and refs. Dead
	// pointer slots keep their stale values as plain integers, which the
	// GC never follows.
	mem []uintptr
	// ptrs holds the region's live pointers to memory outside the stack
	// (heap and static data), each published to the GC exactly once;
	// ptrAt[i] is the word index ptrs[i] came from. refs are the words
	// that held pointers into the region itself (saved frame pointers,
	// pointers to stack locals), with the byte offsets they pointed at, to
	// be relocated at thaw.
	ptrs      []unsafe.Pointer
	n, np, nr uint32
	// nframes is the number of frames; the innermost continues at pc0 and
	// saves its caller's frame pointer at byte offset bp0. The others are
	// found by walking the image: their return addresses are in it.
	nframes uint32
	bp0     uint32
	pc0     uintptr
	// outerBP is the word index of the outermost frame's saved frame
	// pointer, which points into the boundary frame and is patched at thaw;
	// -1 if that frame saves none.
	outerBP int32
	// topOff is the region's top (the boundary frame's SP) as an offset
	// below the goroutine's stack top: where the jump back lands, however
	// the stack has moved since.
	topOff uintptr
	// cleared are the pointer words of stack objects no live pointer
	// reaches that held an address in the stack outside the region:
	// garbage, which the image holds as zero rather than as an address
	// that would dangle once the frames are thawed elsewhere. Nil unless
	// there were any.
	cleared []uint32
}

// words returns the image.
func (c *stackChunk) words() []uintptr { return c.mem[:c.n] }

// ptrAt returns the word indexes of ptrs.
func (c *stackChunk) ptrAt() []uint32 {
	if c.np == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&c.mem[c.n])), c.np)
}

// refs returns the references into the region.
func (c *stackChunk) refs() []stackRef {
	if c.nr == 0 {
		return nil
	}
	return unsafe.Slice((*stackRef)(unsafe.Add(unsafe.Pointer(&c.mem[c.n]), uintptr(c.np)*4)), c.nr)
}

// frames returns the frozen frames, innermost first, read from the image.
func (c *stackChunk) frames() []chunkFrame {
	var out []chunkFrame
	pc, sp := c.pc0, uint32(0)
	for range c.nframes {
		d := descFor(pc)
		out = append(out, chunkFrame{pc: pc, sp: sp, fp: sp + d.size, d: d})
		sp += d.size
		pc = c.mem[sp/uint32(wordSize)-1]
	}
	return out
}

// captureScratch is capture's working space, pooled so that warm yields
// allocate nothing and suspended chunks hold only what thaw needs.
type captureScratch struct {
	c       *stackChunk // the chunk being captured into
	oldPtrs int         // len(c.ptrs) before this capture
	words   []uintptr
	frames  []chunkFrame
	objs    []chunkObject
	bps     []int32
	work    []int32
	ptrAt   []uint32
	refs    []stackRef
	cleared []uint32
}

var scratchPool = sync.Pool{New: func() any { return new(captureScratch) }}

func putScratch(s *captureScratch) {
	s.c, s.words = nil, nil
	scratchPool.Put(s)
}

// seal moves a successful capture from the scratch into the chunk, in as
// little memory as it needs.
func (c *stackChunk) seal(s *captureScratch) {
	n, np, nr := len(s.words), len(s.ptrAt), len(s.refs)
	// The pointer array is reused: clear what the last capture left
	// beyond this one's pointers, or the GC would keep it alive.
	if len(c.ptrs) < s.oldPtrs {
		clear(c.ptrs[len(c.ptrs):s.oldPtrs])
	}
	total := n + (np+2*nr+1)/2
	if cap(c.mem) < total {
		mem := make([]uintptr, total)
		copy(mem, s.words) // the image, captured into c.mem
		c.mem = mem
	}
	c.mem = c.mem[:total]
	c.n, c.np, c.nr = uint32(n), uint32(np), uint32(nr)
	copy(c.ptrAt(), s.ptrAt)
	copy(c.refs(), s.refs)
	c.nframes = uint32(len(s.frames))
	c.pc0 = s.frames[0].pc
	c.bp0 = s.frames[0].fp - 2*uint32(wordSize)
	if len(s.cleared) > 0 || c.cleared != nil {
		c.cleared = append(c.cleared[:0], s.cleared...)
	}
}

type stackRef struct {
	at     uint32 // word index in the chunk
	target uint32 // byte offset from the region's base
}

type chunkFrame struct {
	pc     uintptr    // where the frame continues
	sp, fp uint32     // byte offsets of its SP and FP from the region's base
	d      *frameDesc // its description
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
	// Start at capture's own frame and step to its caller, the innermost
	// frame of the region.
	pc, sp := arch.CallerPCSP()
	s := scratchPool.Get().(*captureScratch)
	s.c, s.oldPtrs = c, len(c.ptrs)
	err := c.captureIn(s, boundary, pc, sp)
	if err != nil {
		// Nothing is suspended: drop what the attempt published.
		clear(c.ptrs[:max(len(c.ptrs), s.oldPtrs)])
		c.ptrs = c.ptrs[:0]
	}
	putScratch(s)
	return err
}

// captureIn is capture, given capture's own PC and SP, with the scratch s.
// Its frame lies below capture's, outside the region.
func (c *stackChunk) captureIn(s *captureScratch, boundary uintptr, pc uintptr, sp unsafe.Pointer) error {
	d := descFor(pc)
	if d.bad {
		return errors.New("weft: capture: its own frame cannot be described")
	}
	pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
	sp = unsafe.Add(sp, d.size)
	base := sp
	c.ptrs = c.ptrs[:0]
	s.ptrAt, s.refs, s.cleared = s.ptrAt[:0], s.refs[:0], s.cleared[:0]
	c.outerBP = -1 // set below if the outermost frame saves one

	// Walk the region, classifying every frame. sp and base are
	// unsafe.Pointers, relocated if a call here moves the stack; their
	// difference is taken with no call in between.
	prev := s.frames[:cap(s.frames)] // the last capture's frames, for their descriptors
	s.frames = s.frames[:0]
	objects := false
	for {
		var d *frameDesc
		if i := len(s.frames); i < len(prev) && prev[i].pc == pc && prev[i].d != nil {
			d = prev[i].d // same call site as last time at this depth
		} else {
			d = descFor(pc)
		}
		if d.entry == boundary && !d.bad {
			break
		}
		if d.stop {
			switch {
			case d.bad && len(s.frames) == 0:
				return errors.New("weft: capture: the caller's frame cannot be described")
			case d.bad && !d.fn.Valid():
				return &errPinned{pinning.NativeFrame, pc} // not Go code
			case d.bad:
				return &errPinned{pinning.UnknownFrame, pc}
			case d.goexit:
				return errors.New("weft: capture: no boundary frame on the stack")
			case d.pinned:
				if p := uintptr(rt.CurG().Panic); p != 0 && uintptr(sp) <= p && p < uintptr(sp)+uintptr(d.size) {
					// A runtime frame holding the panic in progress
					// (gopanic, or Goexit's): the g's _panic record
					// points into the region.
					return &errPinned{pinning.PanicRecord, pc}
				}
				return &errPinned{d.reason, pc}
			default: // no stack maps
				return &errPinned{pinning.UnknownFrame, pc}
			}
		}
		objects = objects || len(d.objs) > 0
		off := uint32(uintptr(sp) - uintptr(base))
		s.frames = append(s.frames, chunkFrame{pc: pc, sp: off, fp: off + d.size, d: d})
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	if len(s.frames) == 0 {
		return errors.New("weft: capture: the boundary is the caller itself")
	}
	if outer := s.frames[len(s.frames)-1].d; outer.args != 0 {
		// Its arguments would live in the boundary frame.
		return fmt.Errorf("weft: capture: outermost frame %s has %d bytes of arguments", outer.fn.Name(), outer.args)
	}
	size := uintptr(s.frames[len(s.frames)-1].fp)
	n := int(size / wordSize)

	// A defer record whose frame lies in the region would dangle.
	g := rt.CurG()
	if g.Defer != nil {
		loOff, hiOff := g.StackHi-uintptr(base), g.StackHi-uintptr(base)-size
		if top, ok := deferIn(g, loOff, hiOff); ok {
			// Name the frame the record belongs to.
			return &errPinned{pinning.DeferRecord, s.framePC(uint32(g.StackHi - uintptr(base) - top))}
		}
	}

	// The region's stack objects and saved frame pointers.
	s.objs, s.bps = s.objs[:0], s.bps[:0]
	last := len(s.frames) - 1
	for i := range s.frames {
		f := &s.frames[i]
		d := f.d
		if objects {
			for k := range d.objs {
				o := &d.objs[k]
				at := int64(f.sp) + o.off
				if at < 0 || at+int64(o.size) > int64(size) {
					return fmt.Errorf("weft: capture: stack object of %s lies outside the region", d.fn.Name())
				}
				s.objs = append(s.objs, chunkObject{off: uint32(at), size: o.size, mask: o.mask})
			}
		}
		// The saved frame pointer, below the return address, if the frame
		// has a body. It is not a Go pointer: it must point into the region
		// (checked by copyRegion), except the outermost, which points into
		// the boundary frame and is patched at thaw.
		if d.hasBP {
			bp := int32((f.fp - 2*uint32(wordSize)) / uint32(wordSize))
			if i == last {
				c.outerBP = bp
			} else {
				s.bps = append(s.bps, bp)
			}
		}
	}

	words, lo, gLo, gHi, err := s.copyRegion(base, g, n)
	if err != nil {
		return err
	}
	r := region{base: base, words: words, lo: lo, hi: lo + size, gLo: gLo, gHi: gHi}

	// Sort the words the maps mark live into pointers out of the stack and
	// pointers into the region; a pointer into the stack outside the region
	// pins it. A pointer into the region makes the stack object it points
	// into live, and that object's pointer words are sorted the same way:
	// the GC's own rule. Each word sorted is zeroed in the image unless it
	// stays a scalar, so sorting a word twice does nothing the second time.
	s.work = s.work[:0]
	for i := range s.frames {
		f := &s.frames[i]
		for _, off := range f.d.ptrOffs {
			w := (f.sp + off) / uint32(wordSize)
			if v := words[w]; v != 0 && (v < gLo || v >= gHi) {
				// The common case, inline: a pointer out of the stack.
				// Re-read it as a pointer from the live stack: base has
				// followed any move, and a pointer out of the stack is
				// unchanged by one.
				c.ptrs = append(c.ptrs, *(*unsafe.Pointer)(unsafe.Add(base, uintptr(w)*wordSize)))
				s.ptrAt = append(s.ptrAt, w)
				words[w] = 0
				continue
			}
			if s.sort(&r, int32(w)) {
				return &errPinned{pinning.StackPointer, f.pc}
			}
		}
	}
	for len(s.work) > 0 {
		w := s.work[len(s.work)-1]
		s.work = s.work[:len(s.work)-1]
		if s.sort(&r, w) {
			return &errPinned{pinning.StackPointer, s.framePC(uint32(w) * uint32(wordSize))}
		}
	}

	// Objects no live pointer reaches publish nothing to the GC. Their
	// contents cannot matter as pointers (the GC would not keep their
	// targets alive), but runtime.adjustframe relocates the pointer words
	// of every stack object, live or not, when it copies a stack, so words
	// pointing into the region are relocated here too; words pointing
	// elsewhere in the stack are garbage left by earlier calls, and are
	// zeroed rather than thawed as addresses into another stack.
	for k := range s.objs {
		o := &s.objs[k]
		if o.live {
			continue
		}
		for j := int32(0); j < o.mask.N; j++ {
			if !o.mask.Ptr(j) {
				continue
			}
			w := int(o.off/uint32(wordSize)) + int(j)
			switch v := words[w]; {
			case v == 0:
			case r.lo <= v && v < r.hi:
				s.refs = append(s.refs, stackRef{at: uint32(w), target: uint32(v - r.lo)})
				words[w] = 0
			case r.gLo <= v && v < r.gHi:
				s.cleared = append(s.cleared, uint32(w))
				words[w] = 0
			}
		}
	}
	c.seal(s)
	return nil
}

// region is what sort needs to know about a region being captured: its
// image, and its bounds and the goroutine stack's, all taken at the moment
// of the copy.
type region struct {
	base     unsafe.Pointer // the live region; follows stack moves
	words    []uintptr
	lo, hi   uintptr
	gLo, gHi uintptr
}

// sort classifies the live word w of the image: a pointer out of the stack
// is published in c.ptrs, a pointer into the region becomes a reference
// (and the stack object it points into becomes live, its pointer words
// queued on s.work), and a pointer into the stack outside the region pins
// the region, which sort reports by returning true.
func (s *captureScratch) sort(r *region, w int32) (pinned bool) {
	v := r.words[w]
	switch {
	case v == 0:
	case r.lo <= v && v < r.hi:
		s.refs = append(s.refs, stackRef{at: uint32(w), target: uint32(v - r.lo)})
		r.words[w] = 0
		off := v - r.lo
		for k := range s.objs {
			o := &s.objs[k]
			if !o.live && uintptr(o.off) <= off && off < uintptr(o.off+o.size) {
				o.live = true
				for j := int32(0); j < o.mask.N; j++ {
					if o.mask.Ptr(j) {
						s.work = append(s.work, int32(o.off/uint32(wordSize))+j)
					}
				}
			}
		}
	case r.gLo <= v && v < r.gHi:
		return true
	default:
		// Re-read the word as a pointer from the live stack: base has
		// followed any move, and a pointer out of the stack is unchanged by
		// one.
		s.c.ptrs = append(s.c.ptrs, *(*unsafe.Pointer)(unsafe.Add(r.base, uintptr(w)*wordSize)))
		s.ptrAt = append(s.ptrAt, uint32(w))
		r.words[w] = 0
	}
	return false
}

// copyRegion copies the n words at base into c.words, takes the bounds of
// the region (lo) and of g's stack at the same stack position, and turns
// the saved frame pointers into offsets.
func (s *captureScratch) copyRegion(base unsafe.Pointer, g *rt.G, n int) (words []uintptr, lo, gLo, gHi uintptr, err error) {
	// The image goes straight into the chunk, with room for offset
	// tables as large as last time's and a little more; seal grows it if
	// they turn out larger.
	c := s.c
	if want := n + int(c.np+2*c.nr+1)/2 + 4; cap(c.mem) < want {
		c.mem = make([]uintptr, want)
	}
	words = c.mem[:n]
	s.words = words
	lo, gLo, gHi = snapshot(words, base, g)
	hi := lo + uintptr(n)*wordSize
	s.c.topOff = gHi - hi
	for _, w := range s.bps {
		v := words[w]
		if v < lo || v >= hi {
			return nil, 0, 0, 0, &errPinned{pinning.UnknownFrame, s.framePC(uint32(uintptr(w) * wordSize))}
		}
		s.refs = append(s.refs, stackRef{at: uint32(w), target: uint32(v - lo)})
		words[w] = 0
	}
	return words, lo, gLo, gHi, nil
}

// chunkObject is a stack object of the region.
type chunkObject struct {
	off, size uint32 // byte offset from the region's base, and size
	mask      rt.Bitvector
	live      bool
}

// framePC returns the PC of the frame holding the byte at offset off.
func (s *captureScratch) framePC(off uint32) uintptr {
	for _, f := range s.frames {
		if off < f.fp {
			return f.pc
		}
	}
	return 0
}

// deferIn reports whether a defer record of g belongs to a frame whose SP
// lies between the offsets loOff and hiOff below g's stack top (loOff is
// the larger), and returns that SP as an offset below the stack top.
// Offsets, not addresses: this call may move the stack.
func deferIn(g *rt.G, loOff, hiOff uintptr) (uintptr, bool) {
	found, at := false, uintptr(0)
	g.DeferOffsets(func(off uintptr) bool {
		if hiOff < off && off <= loOff {
			found, at = true, off
			return false
		}
		return true
	})
	return at, found
}

// snapshot copies len(words) stack words from base into words and returns
// base and g's stack bounds as integers, all taken at one stack position:
// it is a nosplit function of its own (not inlined, so that the property
// holds whatever its caller looks like), so the stack cannot grow while it
// runs, and no safe point inside it may shrink the stack (only an
// asynchronous preemption can stop it, and the runtime never moves a stack
// stopped asynchronously). The race detector and checkptr would insert
// calls into the loop, so both are off here.
//
//go:noinline
//go:nosplit
//go:norace
//go:nocheckptr
func snapshot(words []uintptr, base unsafe.Pointer, g *rt.G) (lo, gLo, gHi uintptr) {
	for i := range words {
		words[i] = *(*uintptr)(unsafe.Add(base, uintptr(i)*wordSize))
	}
	return uintptr(base), g.StackLo, g.StackHi
}
