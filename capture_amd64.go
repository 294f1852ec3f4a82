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

// This file is the general path of a capture (freeze_amd64.go). captureIn
// copies the frames between a yield point and a boundary frame into a
// stackChunk, keeping the capture invariants of docs/design.md. Or it
// reports a pinning reason when the region cannot be moved. It leaves the
// frames in place. Its caller discards them by jumping back to the entry
// trampoline.

const wordSize = unsafe.Sizeof(uintptr(0))

// The thaw policy. The innermost record holds weft's own frames above the
// code that yielded, such as a generator's yield function or a scheduler's
// park. Yield's frame is not among them: a capture leaves it out. The
// record holds firstRecordFrames more: the frame that called the yield API
// and its caller. So a loop that yields through a helper resumes without
// crossing the barrier.
//
// The innermost record leaves out the engine's frames at the bottom of the
// region if it keeps a frame of the code that yielded. That is usually a
// virtual thread's vthreadBody, which returns only when the body does.
// Kept, it would be frozen and thawed on every round trip of a yield loop
// in the body's own function. An engine frame at the bottom only because
// a lazy thaw stopped there, a nested Continuation.Run, is cut off too.
//
// Every other record holds at least laterRecordFrames. Every record is
// extended so that no reference into the stack crosses a record boundary:
// no thawed frame ever points into a frame that is still frozen. A
// record's outermost frame has at most arch.MaxRecordArgs bytes of
// arguments.
//
// A small fresh region is one record instead, as Loom thaws a small chunk
// whole. It is the first capture after the body was entered directly, of
// at most wholeRecordWords words. Each record carries a header, its
// table's rounding and a copy of its outermost frame's arguments; a
// virtual thread parked once would keep them all. The resume thaws the
// one record whole. The next capture, above the barrier, cuts the region
// by the rules above.
const (
	firstRecordFrames = 2
	laterRecordFrames = 8
	wholeRecordWords  = 128
)

// captureScratch is capture's working space, pooled so that warm yields
// allocate nothing and suspended chunks hold only what thaw needs.
type captureScratch struct {
	c         *stackChunk // the chunk being captured into
	words     []uintptr
	frames    []chunkFrame
	objs      []chunkObject
	bps       []int32 // frames that save a BP, but the outermost
	outerBP   int32
	outerArgs uint32 // bytes of arguments of the outermost frame
	work      []int32
	ptrs      []unsafe.Pointer
	ptrAt     []uint32
	refs      []stackRef // references from live words
	weak      []stackRef // references from words of dead stack objects
	cleared   []uint32
	reach     []int32 // per frame: the outermost frame a reference ties it to
	cuts      []int32 // per record, innermost first: its first frame
	rec       []int32 // per pointer, then per reference: its record
	count     []int32
	frameRec  []int32 // per frame: its record
	order     []int32 // pointers, then references, by record
	first     []int32 // where each record's pointers and references start in order
	fill      []int32
	defs      []scratchDefer // the region's defer records, innermost first

	// What templateFor needs to know about the capture: capture's own
	// frame, the frame it left out (skipPC 0 if none) and the barrier.
	selfPC           uintptr
	selfSize         uint32
	skipPC           uintptr
	skipSize         uint32
	stopPC           uintptr
	stopSize         uint32
	barrier, objects bool
}

var scratchPool = sync.Pool{New: func() any { return new(captureScratch) }}

func putScratch(s *captureScratch) {
	clear(s.ptrs) // published, or dropped: either way not the scratch's to keep
	clear(s.defs)
	s.c, s.words, s.ptrs, s.defs = nil, s.words[:0], s.ptrs[:0], s.defs[:0]
	scratchPool.Put(s)
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

// thawPC is the entry PC of arch.Thaw, the return barrier.
var thawPC = arch.ThawPC()

// captureIn is capture, given capture's own PC and SP, with the scratch s.
// Its frame lies below capture's, outside the region. Each step keeps the
// design.md invariants it names.
//
// sp and base are unsafe.Pointers into the stack, which a descriptor
// lookup may move (design.md invariant 4). Every step takes them as
// arguments, so the runtime relocates them with the stack. Their
// difference is taken with no call in between.
func (c *stackChunk) captureIn(s *captureScratch, boundary uintptr, pc uintptr, sp unsafe.Pointer, skip bool) error {
	pc, sp, err := s.skipEngineFrames(pc, sp, skip)
	if err != nil {
		return err
	}
	base := sp
	s.ptrs, s.ptrAt, s.refs, s.weak, s.cleared = s.ptrs[:0], s.ptrAt[:0], s.refs[:0], s.weak[:0], s.cleared[:0]
	s.outerBP = -1 // set by findObjects if the outermost frame saves one
	barrier, objects, err := s.walkRegion(boundary, pc, sp, base)
	if err != nil {
		return err
	}
	full, err := s.outerArguments(barrier)
	if err != nil {
		return err
	}
	g := rt.CurG()
	if err := s.collectDefers(g, base); err != nil {
		return err
	}
	if err := s.findObjects(objects, full); err != nil {
		return err
	}
	words, lo, gLo, gHi, err := s.copyRegion(base, g, int(full/wordSize))
	if err != nil {
		return err
	}
	s.clearDeferWords(words)
	r := region{base: base, words: words, lo: lo, hi: lo + full, gLo: gLo, gHi: gHi}
	if err := s.sortLive(&r); err != nil {
		return err
	}
	s.clearDead(&r)
	s.barrier, s.objects = barrier, objects
	if !barrier {
		c.reset() // a fresh region replaces whatever c held
	}
	s.partition()
	c.push(s)
	s.unlinkDefers(rt.CurG()) // committed: the records are the chunk's
	return nil
}

// skipEngineFrames steps from capture's own frame (pc, sp) to its caller,
// and with skip on to weft.Yield's caller: the innermost frame of the
// region, whose PC and SP it returns.
func (s *captureScratch) skipEngineFrames(pc uintptr, sp unsafe.Pointer, skip bool) (uintptr, unsafe.Pointer, error) {
	d := descFor(pc)
	if d.bad {
		return 0, nil, errors.New("weft: capture: its own frame cannot be described")
	}
	s.selfPC, s.selfSize = pc, d.size
	pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
	sp = unsafe.Add(sp, d.size)
	s.skipPC, s.skipSize = 0, 0
	if skip {
		d := descFor(pc)
		if d.bad || !d.yield {
			return 0, nil, errors.New("weft: capture: the frame to leave out is not weft.Yield's")
		}
		s.skipPC, s.skipSize = pc, d.size
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	return pc, sp, nil
}

// walkRegion walks the region from its innermost frame (pc, sp; base is
// its SP) up to the boundary frame, describing every frame into s.frames.
// It reports whether the boundary is the return barrier and whether a
// frame has stack objects. A frame that cannot be moved pins the region
// (design.md invariant 1); a barrier of another continuation refuses it.
func (s *captureScratch) walkRegion(boundary uintptr, pc uintptr, sp, base unsafe.Pointer) (barrier, objects bool, err error) {
	prev := s.frames[:cap(s.frames)] // the last capture's frames, for their descriptors
	s.frames = s.frames[:0]
	for {
		var d *frameDesc
		if i := len(s.frames); i < len(prev) && prev[i].pc == pc && prev[i].d != nil {
			d = prev[i].d // same call site as last time at this depth
		} else {
			d = descFor(pc)
		}
		if d.entry == thawPC && !d.bad {
			// The return barrier: its first argument is the Link it
			// thaws, which must be this chunk's.
			if *(*unsafe.Pointer)(unsafe.Add(sp, d.size)) != unsafe.Pointer(&s.c.Link) {
				return false, false, errors.New("weft: capture: the return barrier above the region belongs to another continuation")
			}
			barrier = true
			s.stopPC, s.stopSize = pc, d.size
			break
		}
		if d.entry == boundary && !d.bad {
			s.stopPC, s.stopSize = pc, d.size
			break
		}
		if d.stop {
			return false, false, s.refusal(d, pc, sp)
		}
		objects = objects || len(d.objs) > 0
		off := uint32(uintptr(sp) - uintptr(base))
		s.frames = append(s.frames, chunkFrame{pc: pc, sp: off, fp: off + d.size, d: d})
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	if len(s.frames) == 0 {
		return false, false, errors.New("weft: capture: the boundary is the caller itself")
	}
	return barrier, objects, nil
}

// refusal returns why the region cannot be captured at frame d, where the
// walk must stop (d.stop), at pc and sp (design.md invariants 1 and 3).
func (s *captureScratch) refusal(d *frameDesc, pc uintptr, sp unsafe.Pointer) error {
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
			// A runtime frame holding the panic in progress (gopanic,
			// or Goexit's): the g's _panic record points into the
			// region.
			return &errPinned{pinning.PanicRecord, pc}
		}
		return &errPinned{d.reason, pc}
	default: // no stack maps
		return &errPinned{pinning.UnknownFrame, pc}
	}
}

// outerArguments checks the outermost frame's arguments and returns the
// region's size in bytes, those arguments included. They live in the
// boundary frame: in the return barrier's argument area, which the region
// takes in; a body called by Enter has none.
func (s *captureScratch) outerArguments(barrier bool) (full uintptr, err error) {
	outer := s.frames[len(s.frames)-1].d
	if outer.args < 0 || outer.args%int32(wordSize) != 0 || (!barrier && outer.args != 0) || outer.args > arch.MaxRecordArgs {
		return 0, fmt.Errorf("weft: capture: outermost frame %s has %d bytes of arguments", outer.fn.Name(), outer.args)
	}
	s.outerArgs = uint32(outer.args)
	return uintptr(s.frames[len(s.frames)-1].fp) + uintptr(outer.args), nil
}

// findObjects lists the region's stack objects (if objects) and the
// frames that save a frame pointer. A saved frame pointer is no Go
// pointer. It must point into the region (design.md invariant 3, which
// copyRegion checks), except the outermost: that one points into the
// boundary frame, and thaw patches it.
func (s *captureScratch) findObjects(objects bool, full uintptr) error {
	s.objs, s.bps = s.objs[:0], s.bps[:0]
	last := len(s.frames) - 1
	for i := range s.frames {
		f := &s.frames[i]
		d := f.d
		if objects {
			for k := range d.objs {
				o := &d.objs[k]
				at := int64(f.sp) + o.off
				if at < 0 || at+int64(o.size) > int64(full) {
					return fmt.Errorf("weft: capture: stack object of %s lies outside the region", d.fn.Name())
				}
				s.objs = append(s.objs, chunkObject{off: uint32(at), size: o.size, mask: o.mask})
			}
		}
		if d.hasBP {
			bp := int32((f.fp - 2*uint32(wordSize)) / uint32(wordSize))
			if i == last {
				s.outerBP = bp
			} else {
				s.bps = append(s.bps, int32(i))
			}
		}
	}
	return nil
}

// sortLive sorts the words the maps mark live into pointers out of the
// stack and pointers into the region; a pointer into the stack outside
// the region pins it (design.md invariant 2). A pointer into the region
// makes the stack object it points into live, and that object's pointer
// words are sorted the same way: the GC's own rule. Each word sorted is
// zeroed in the image unless it stays a scalar, so sorting a word twice
// does nothing the second time.
func (s *captureScratch) sortLive(r *region) error {
	words, base := r.words, r.base
	s.work = s.work[:0]
	for i := range s.frames {
		f := &s.frames[i]
		for _, off := range f.d.ptrOffs {
			w := (f.sp + off) / uint32(wordSize)
			if v := words[w]; v != 0 && (v < r.gLo || v >= r.gHi) {
				// The common case, inline: a pointer out of the stack.
				// Re-read it as a pointer from the live stack: base has
				// followed any move, and a pointer out of the stack is
				// unchanged by one.
				s.ptrs = append(s.ptrs, *(*unsafe.Pointer)(unsafe.Add(base, uintptr(w)*wordSize)))
				s.ptrAt = append(s.ptrAt, w)
				words[w] = 0
				continue
			}
			if s.sort(r, int32(w)) {
				return &errPinned{pinning.StackPointer, f.pc}
			}
		}
	}
	if s.sortDeferFns(r) {
		return &errPinned{pinning.StackPointer, s.frames[0].pc}
	}
	for len(s.work) > 0 {
		w := s.work[len(s.work)-1]
		s.work = s.work[:len(s.work)-1]
		if s.sort(r, w) {
			return &errPinned{pinning.StackPointer, s.framePC(uint32(w) * uint32(wordSize))}
		}
	}
	return nil
}

// clearDead handles the pointer words of stack objects no live pointer
// reaches. They publish nothing to the GC, and their contents cannot
// matter as pointers (the GC would not keep their targets alive). But
// runtime.adjustframe relocates the pointer words of every stack object,
// live or not, when it copies a stack. So words pointing into their own
// record are relocated here too (weak references). Words pointing
// elsewhere in the stack are garbage left by earlier calls: they are
// zeroed rather than thawed as addresses into another stack.
func (s *captureScratch) clearDead(r *region) {
	words := r.words
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
				s.weak = append(s.weak, stackRef{at: uint32(w), target: uint32(v - r.lo)})
				words[w] = 0
			case r.gLo <= v && v < r.gHi:
				s.cleared = append(s.cleared, uint32(w))
				words[w] = 0
			}
		}
	}
}

// partition cuts the captured frames into records, innermost first, by
// the thaw policy: a record may not be cut between the word of a
// reference into the stack and the word it points at.
func (s *captureScratch) partition() {
	nf := int32(len(s.frames))
	s.cuts = s.cuts[:0]
	first := int32(0)
	for first < nf && s.frames[first].d.engine {
		first++
	}
	// The engine's frames at the region's outer end (usually the
	// scheduler's vthreadBody, which returns only when the body does):
	// the innermost record stops above them, if it keeps a frame of the
	// code that yielded.
	bottom := nf
	for bottom > first+1 && s.frames[bottom-1].d.engine {
		bottom--
	}
	first = min(first+firstRecordFrames, bottom)
	if nf <= first || eagerThaw || !s.barrier && len(s.words) <= wholeRecordWords {
		s.cuts = append(s.cuts, 0) // one record, whatever the references
		return
	}
	s.reach = s.reach[:0]
	for i := range nf {
		s.reach = append(s.reach, i)
	}
	for _, r := range s.refs {
		// A word in a callee's argument area (the bottom of its caller's
		// frame) is the callee's as much as the caller's.
		a, b := s.owners(r.at)
		t := min(s.frameOf(r.target), nf-1)
		s.reach[min(a, t)] = max(s.reach[min(a, t)], b, t)
	}
	s.cuts = s.cuts[:0]
	for start := int32(0); start < nf; {
		end := start + laterRecordFrames
		if start == 0 {
			end = first
		}
		end = min(end, nf)
		for i := start; i < end || (end < nf && s.frames[end-1].d.args > arch.MaxRecordArgs); i++ {
			end = max(end, s.reach[i]+1, i+1)
		}
		s.cuts = append(s.cuts, start)
		start = end
	}
}

// owners returns the frames a word of the region belongs to: the frame
// holding it, and the callee below it too if the word is in the callee's
// argument area. Words past the outermost frame are its arguments.
func (s *captureScratch) owners(w uint32) (lo, hi int32) {
	nf := int32(len(s.frames))
	j := s.frameOf(w * uint32(wordSize))
	if j >= nf {
		return nf - 1, nf - 1
	}
	if j > 0 {
		if f := &s.frames[j-1]; w*uint32(wordSize) < f.fp+uint32(f.d.args) {
			return j - 1, j
		}
	}
	return j, j
}

// frameOf returns the index of the frame holding the region byte off.
func (s *captureScratch) frameOf(off uint32) int32 {
	lo, hi := 0, len(s.frames)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.frames[m].fp <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return int32(lo)
}

// recordOf returns the index (innermost first) of the record holding the
// region word w.
func (s *captureScratch) recordOf(w uint32) int32 {
	return s.recordOfFrame(min(s.frameOf(w*uint32(wordSize)), int32(len(s.frames))-1))
}

// recordOfFrame returns the index of the record holding frame f.
func (s *captureScratch) recordOfFrame(f int32) int32 { return s.frameRec[f] }

// refAt returns the ith of the strong references followed by the weak.
func (s *captureScratch) refAt(i int) stackRef {
	if i < len(s.refs) {
		return s.refs[i]
	}
	return s.weak[i-len(s.refs)]
}

// recordFrames returns the frames [fs, fe) of record r (innermost first).
func (s *captureScratch) recordFrames(r int) (fs, fe int) {
	fs, fe = int(s.cuts[r]), len(s.frames)
	if r+1 < len(s.cuts) {
		fe = int(s.cuts[r+1])
	}
	return fs, fe
}

// recordLast reports whether frame f is the outermost of its record.
func (s *captureScratch) recordLast(f int32) bool {
	return int(f) == len(s.frames)-1 || s.frameRec[f] != s.frameRec[f+1]
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

// sort classifies the live word w of the image. A pointer out of the
// stack is published in the pointers array. A pointer into the region
// becomes a reference; the stack object it points into becomes live, its
// pointer words queued on s.work. A pointer into the stack outside the
// region pins the region: sort then returns true.
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
		s.ptrs = append(s.ptrs, *(*unsafe.Pointer)(unsafe.Add(r.base, uintptr(w)*wordSize)))
		s.ptrAt = append(s.ptrAt, uint32(w))
		r.words[w] = 0
	}
	return false
}

// copyRegion copies the n words at base into s.words, takes the bounds of
// the region (lo) and of g's stack at the same stack position, and checks
// and clears the saved frame pointers.
func (s *captureScratch) copyRegion(base unsafe.Pointer, g *rt.G, n int) (words []uintptr, lo, gLo, gHi uintptr, err error) {
	if cap(s.words) < n {
		s.words = make([]uintptr, n+n/4)
	}
	words = s.words[:n]
	s.words = words
	lo, gLo, gHi = snapshot(unsafe.Pointer(unsafe.SliceData(words)), n, base, g)
	// Every saved frame pointer but the outermost must point at the next
	// frame's own: push stores them as that link, and thaw rebuilds it.
	for _, i := range s.bps {
		w := (s.frames[i].fp - 2*uint32(wordSize)) / uint32(wordSize)
		if v := words[w]; i+1 >= int32(len(s.frames)) || !s.frames[i+1].d.hasBP || v != lo+uintptr(s.frames[i+1].fp)-2*wordSize {
			return nil, 0, 0, 0, &errPinned{pinning.UnknownFrame, s.frames[i].pc}
		}
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

// maxWords bounds the words snapshot copies: 8 GB of them.
const maxWords = 1 << 30
