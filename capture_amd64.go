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
// leaves the frames in place; its caller (weft.Yield, scSuspend, scYield)
// then discards them by jumping back to the entry trampoline.

const wordSize = unsafe.Sizeof(uintptr(0))

// stackChunk holds a continuation's frozen frames, like Loom's stack
// chunk: two heap arrays, one of scalar words and one of live pointers.
// The frames are kept as a stack of records (arch.Link describes the
// layout): each record is a run of frames that can be thawed on its own,
// the innermost record last. Thaw copies back only the last record and
// leaves a return barrier under it (arch.Thaw); a capture freezes only the
// frames above the barrier, the ones thawed since, and pushes them as new
// records. A yield in a loop deep in a call stack thus costs a record or
// two per round trip, whatever the depth.
type stackChunk struct {
	arch.Link // first: the assembly reads it

	// Link.Mem is the array of memLen words (memory) that holds the
	// records: an image of the record's frames in which the words that
	// held live pointers or pointers into the record are zero (those are
	// in the pointers array and the record's references), its tables, and
	// its header. Dead pointer slots keep their stale values as plain
	// integers, which the GC never follows.
	//
	// Link.Ptrs is the array of ptrsLen pointers (pointers) that holds the
	// records' live pointers to memory outside the stack (heap and static
	// data), each published to the GC exactly once. Its elements
	// [PtrTop:ptrHigh] may still hold the pointers of records thawed since
	// the last capture, which clears them.
	//
	// The arrays are kept through Link's pointers alone, not slices: a
	// record per continuation, and every parked virtual thread has one.
	memLen, ptrsLen, ptrHigh uint32

	// unwound counts the panics and Goexits carried into frozen frames
	// since the engine last read it (scCont.crossing); it is here, and not
	// in the scCont, because it fills what would be padding.
	unwound uint32

	// tmpl is the template of the last capture, if it qualified: the next
	// capture tries it first (template_amd64.go).
	tmpl *captureTemplate
}

// memory returns the array that holds the records.
func (c *stackChunk) memory() []uintptr { return unsafe.Slice((*uintptr)(c.Mem), c.memLen) }

// pointers returns the array that holds the records' pointers.
func (c *stackChunk) pointers() []unsafe.Pointer {
	return unsafe.Slice((*unsafe.Pointer)(c.Ptrs), c.ptrsLen)
}

// clearedHook, if set (by tests), is told after each capture the words
// (region word indexes) of stack objects no live pointer reaches that held
// an address in the stack outside the record: garbage, which the image
// holds as zero rather than as an address that would dangle once the
// frames are thawed elsewhere. The chunk does not keep them.
var clearedHook func(c *stackChunk, words []uint32)

// The thaw policy: the innermost record holds weft's own frames above the
// code that yielded (a generator's yield function, a scheduler's park; not
// Yield's, which a capture leaves out) and firstRecordFrames more (the
// frame that called the yield API and its caller, so that a loop that
// yields through a helper resumes without crossing the barrier), but not
// the engine's frames at the bottom of the region if it keeps a frame of
// the code that yielded: usually a virtual thread's vthreadBody, which
// returns only when the body does, and which a yield loop in the body's
// own function would otherwise freeze and thaw on every round trip. (An
// engine frame at the bottom only because a lazy thaw stopped there, a
// nested Continuation.Run, is cut off too, and costs a barrier crossing
// when it returns.) Every other record holds at least laterRecordFrames;
// and every record is extended so that no reference into the stack
// crosses a record boundary: no thawed frame ever points into a frame
// that is still frozen. A record's outermost frame also has at most
// arch.MaxRecordArgs bytes of arguments.
//
// A small fresh region (the first capture after the body was entered
// directly, of at most wholeRecordWords words) is one record instead, as
// Loom thaws a small chunk whole: every record costs a header, its
// table's rounding and a copy of its outermost frame's arguments, which a
// parked virtual thread, frozen once and then left, would keep for
// nothing. Its resume thaws it whole, and the next capture, above the
// barrier, cuts the region by the rule above, so a yield loop pays for
// one larger capture and then freezes only its top records again.
const (
	firstRecordFrames = 2
	laterRecordFrames = 8
	wholeRecordWords  = 128
)

// record is a record of a chunk: where it lies and its header.
type record struct {
	start int // index in mem of the record's image
	end   int // index in mem just past its header
	arch.RecordHeader
}

// recordFlags returns a record header's Flags: its defers flag and the
// word index of the first frame of its saved-BP chain.
func recordFlags(defers bool, bpFirst uint32) uint32 {
	f := bpFirst << arch.BPShift
	if defers {
		f |= arch.RecordDefers
	}
	return f
}

// bpFirst returns the word index of the first saved BP of the record's
// chain (see arch.RecordHeader).
func (r record) bpFirst() uint32 { return r.Flags >> arch.BPShift }

// recordEnding decodes the record whose header ends at mem[end].
func (c *stackChunk) recordEnding(end int) record {
	h := arch.HeaderOf(c.memory()[:end])
	return record{start: end - int(h.Len), end: end, RecordHeader: *h}
}

// records returns the chunk's records, innermost first.
func (c *stackChunk) records() []record {
	var out []record
	for end := int(c.MemTop); end > 0; {
		r := c.recordEnding(end)
		out = append(out, r)
		end = r.start
	}
	return out
}

// words returns a record's image.
func (c *stackChunk) words(r record) []uintptr { return c.memory()[r.start : r.start+int(r.Words)] }

// ptrAt returns a record's pointer word indexes.
func (c *stackChunk) ptrAt(r record) []uint32 {
	if r.Ptrs == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&c.memory()[r.start+int(r.Words)])), r.Ptrs)
}

// refs returns a record's references into itself.
func (c *stackChunk) refs(r record) []stackRef {
	if r.Refs == 0 {
		return nil
	}
	return unsafe.Slice((*stackRef)(unsafe.Add(unsafe.Pointer(&c.memory()[r.start+int(r.Words)]), uintptr(r.Ptrs)*4)), r.Refs)
}

// frozenFrames is the number of frames in the chunk.
func (c *stackChunk) frozenFrames() int {
	n := 0
	for end := int(c.MemTop); end > 0; {
		r := c.recordEnding(end)
		n += int(r.Frames)
		end = r.start
	}
	return n
}

// frames returns the frozen frames, innermost first, read from the
// records; sp and fp are byte offsets from the base of each frame's record.
func (c *stackChunk) frames() []chunkFrame {
	var out []chunkFrame
	for _, r := range c.records() {
		pc, sp := r.PC, uint32(0)
		for i := range r.Frames {
			d := descFor(pc)
			out = append(out, chunkFrame{pc: pc, sp: sp, fp: sp + d.size, d: d})
			sp += d.size
			if i+1 < r.Frames {
				pc = c.memory()[r.start+int(sp/uint32(wordSize))-1]
			}
		}
	}
	return out
}

// deferPending reports whether a frozen frame has a deferred call pending:
// whether a panic or runtime.Goexit that reaches the return barrier must
// thaw more frames to run them.
func (c *stackChunk) deferPending() bool {
	for end := int(c.MemTop); end > 0; {
		r := c.recordEnding(end)
		if r.Flags&arch.RecordDefers != 0 {
			return true
		}
		end = r.start
	}
	return false
}

// dropToDefers discards the innermost records whose frames have no
// deferred call pending: a panic unwinds them without running anything.
func (c *stackChunk) dropToDefers() {
	for c.MemTop > 0 {
		r := c.recordEnding(int(c.MemTop))
		if r.Flags&arch.RecordDefers != 0 {
			return
		}
		c.MemTop = uintptr(r.start)
		c.PtrTop -= uintptr(r.Ptrs)
	}
}

// reset empties the chunk, keeping its arrays.
func (c *stackChunk) reset() {
	c.MemTop, c.PtrTop = 0, 0
}

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
	s.c, s.words, s.ptrs = nil, s.words[:0], s.ptrs[:0]
	scratchPool.Put(s)
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

// capture freezes into c the frames from its caller's frame (which
// continues right after this call) up to, not including, the innermost
// frame of the function whose entry PC is boundary, or of arch.Thaw, the
// return barrier under frames thawed from c. With skip, the region starts
// at the caller's caller instead, which continues where the caller returns:
// the caller is weft.Yield, whose frame holds nothing a resume needs (its
// results are made by yieldReturn), so a suspended continuation does not
// keep it and a round trip does not copy it. Frames above a barrier are
// pushed as new records on top of those still frozen; frames above boundary
// replace c's records. It returns an *errPinned if the region cannot be
// frozen, and another error if the walk finds no boundary frame; c is
// unchanged then. If n is not nil, a capture that succeeds counts what it
// froze there: the counters of the continuation whose record holds c.
//
// The stack may move whenever capture calls anything, so it keeps
// positions either as unsafe.Pointers in its own frame (which the runtime
// relocates with the stack) or as offsets, and compares raw stack addresses
// only with bounds computed in the same stretch of code without calls.
//
//go:noinline
func (c *stackChunk) capture(boundary uintptr, skip bool, n *counters) error {
	// Start at capture's own frame and step to its caller (and with skip,
	// to the caller's caller), the innermost frame of the region.
	pc, sp := arch.CallerPCSP()
	if t := c.tmpl; t != nil {
		if c.fastCapture(t, pc, sp, skip) {
			if n != nil { // the bytes are not worked out for nothing
				n.froze(t.nf, t.frozenBytes(), true)
			}
			return nil
		}
		// Another chain than the last capture's may have a template too.
		if o := templateAt(pc, sp, skip); o != nil && o != t && c.fastCapture(o, pc, sp, skip) {
			c.tmpl = o
			n.froze(o.nf, o.frozenBytes(), true)
			return nil
		}
	}
	s := scratchPool.Get().(*captureScratch)
	s.c = c
	err := c.captureIn(s, boundary, pc, sp, skip)
	if err == nil {
		n.froze(len(s.frames), uintptr(len(s.words))*wordSize-uintptr(s.outerArgs), false)
		c.tmpl = s.templateFor()
		if c.tmpl != nil {
			c.roomFor(c.tmpl)
		}
	}
	putScratch(s)
	return err
}

// scThaw is the entry PC of arch.Thaw, the return barrier.
var scThaw = arch.ThawPC()

// captureIn is capture, given capture's own PC and SP, with the scratch s.
// Its frame lies below capture's, outside the region.
func (c *stackChunk) captureIn(s *captureScratch, boundary uintptr, pc uintptr, sp unsafe.Pointer, skip bool) error {
	d := descFor(pc)
	if d.bad {
		return errors.New("weft: capture: its own frame cannot be described")
	}
	s.selfPC, s.selfSize = pc, d.size
	pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
	sp = unsafe.Add(sp, d.size)
	s.skipPC, s.skipSize = 0, 0
	if skip {
		d := descFor(pc)
		if d.bad || !d.yield {
			return errors.New("weft: capture: the frame to leave out is not weft.Yield's")
		}
		s.skipPC, s.skipSize = pc, d.size
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	base := sp
	s.ptrs, s.ptrAt, s.refs, s.weak, s.cleared = s.ptrs[:0], s.ptrAt[:0], s.refs[:0], s.weak[:0], s.cleared[:0]
	s.outerBP = -1 // set below if the outermost frame saves one

	// Walk the region, classifying every frame. sp and base are
	// unsafe.Pointers, relocated if a call here moves the stack; their
	// difference is taken with no call in between.
	prev := s.frames[:cap(s.frames)] // the last capture's frames, for their descriptors
	s.frames = s.frames[:0]
	objects := false
	barrier := false
	for {
		var d *frameDesc
		if i := len(s.frames); i < len(prev) && prev[i].pc == pc && prev[i].d != nil {
			d = prev[i].d // same call site as last time at this depth
		} else {
			d = descFor(pc)
		}
		if d.entry == scThaw && !d.bad {
			// The return barrier: its first argument is the Link it
			// thaws, which must be c's.
			if *(*unsafe.Pointer)(unsafe.Add(sp, d.size)) != unsafe.Pointer(&c.Link) {
				return errors.New("weft: capture: the return barrier above the region belongs to another continuation")
			}
			barrier = true
			s.stopPC, s.stopSize = pc, d.size
			break
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
	// The outermost frame's arguments live in the boundary frame: in the
	// return barrier's argument area, which the region takes in; a body
	// called by Enter has none.
	outer := s.frames[len(s.frames)-1].d
	if outer.args < 0 || outer.args%int32(wordSize) != 0 || (!barrier && outer.args != 0) || outer.args > arch.MaxRecordArgs {
		return fmt.Errorf("weft: capture: outermost frame %s has %d bytes of arguments", outer.fn.Name(), outer.args)
	}
	size := uintptr(s.frames[len(s.frames)-1].fp)
	s.outerArgs = uint32(outer.args)
	full := size + uintptr(outer.args) // the region, arguments included
	n := int(full / wordSize)

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
				if at < 0 || at+int64(o.size) > int64(full) {
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
				s.outerBP = bp
			} else {
				s.bps = append(s.bps, int32(i))
			}
		}
	}

	words, lo, gLo, gHi, err := s.copyRegion(base, g, n)
	if err != nil {
		return err
	}
	r := region{base: base, words: words, lo: lo, hi: lo + full, gLo: gLo, gHi: gHi}

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
				s.ptrs = append(s.ptrs, *(*unsafe.Pointer)(unsafe.Add(base, uintptr(w)*wordSize)))
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
	// pointing into their own record are relocated here too; words
	// pointing elsewhere in the stack are garbage left by earlier calls,
	// and are zeroed rather than thawed as addresses into another stack.
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
	s.barrier, s.objects = barrier, objects
	if !barrier {
		c.reset() // a fresh region replaces whatever c held
	}
	s.partition()
	c.push(s)
	return nil
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

// push appends the records of a successful capture to c, outermost first,
// so that the innermost record ends up last, where arch.Thaw pops it.
func (c *stackChunk) push(s *captureScratch) {
	nrec := len(s.cuts)
	if nrec == 1 {
		c.pushOne(s)
		return
	}
	// Which record each frame is in.
	s.frameRec = s.frameRec[:0]
	for r := range nrec {
		fs, fe := s.recordFrames(r)
		for range fe - fs {
			s.frameRec = append(s.frameRec, int32(r))
		}
	}
	// Which record each pointer and reference belongs to, and how many
	// each record has. Pointers first, then strong references, then weak
	// ones; a weak reference out of its own record is dropped.
	s.rec = s.rec[:0]
	s.count = append(s.count[:0], make([]int32, 2*nrec)...)
	for _, w := range s.ptrAt {
		// A pointer in the argument area of a record's outermost frame is
		// that frame's: its record ends with those words, and thaw puts
		// them in the barrier's argument area.
		a, _ := s.owners(w)
		r := s.recordOfFrame(a)
		s.rec = append(s.rec, r)
		s.count[2*r]++
	}
	for _, x := range s.refs {
		r := s.recordOf(x.at)
		s.rec = append(s.rec, r)
		s.count[2*r+1]++
	}
	for _, x := range s.weak {
		r := s.recordOf(x.at)
		if s.recordOf(x.target/uint32(wordSize)) != r {
			r = -1
		} else {
			s.count[2*r+1]++
		}
		s.rec = append(s.rec, r)
	}
	// Saved frame pointers are no references: each record's image chains
	// them (see arch.RecordHeader).

	// Room for everything.
	total := 0
	for r := range nrec {
		fs, fe := s.recordFrames(r)
		nw := int(s.frames[fe-1].fp-s.frames[fs].sp+s.argsOf(fe-1)) / int(wordSize)
		total += nw + int(s.count[2*r]+2*s.count[2*r+1]+1)/2 + arch.RecordHeaderWords
	}
	np := len(s.ptrAt)
	c.reserve(total, np, true)
	top, ptop := int(c.MemTop), int(c.PtrTop)
	mem, ptrs := c.memory(), c.pointers()

	// The pointers and references in record order (a counting sort), so
	// that each record's are found without scanning everyone's: record
	// r's pointers are order[first[r]:first[r+1]], and its references
	// order[first[nrec+1+r]:first[nrec+2+r]].
	s.first = append(s.first[:0], make([]int32, 2*(nrec+1))...)
	first := s.first
	for i, r := range s.rec {
		switch {
		case r < 0: // a dropped weak reference
		case i < np:
			first[r+1]++
		default:
			first[nrec+2+int(r)]++
		}
	}
	for j := 1; j < len(first); j++ {
		first[j] += first[j-1]
	}
	s.order = append(s.order[:0], make([]int32, int(first[2*nrec+1]))...)
	s.fill = append(s.fill[:0], first...) // the next free slot of each list
	for i, r := range s.rec {
		switch {
		case r < 0:
		case i < np:
			s.order[s.fill[r]] = int32(i)
			s.fill[r]++
		default:
			s.order[s.fill[nrec+1+int(r)]] = int32(i)
			s.fill[nrec+1+int(r)]++
		}
	}

	for r := nrec - 1; r >= 0; r-- {
		fs, fe := s.recordFrames(r)
		rb := s.frames[fs].sp / uint32(wordSize) // the record's first word in the region
		nw := (s.frames[fe-1].fp - s.frames[fs].sp + s.argsOf(fe-1)) / uint32(wordSize)
		npr, nrr := int(s.count[2*r]), int(s.count[2*r+1])
		rec := mem[top : top+int(nw)+(npr+2*nrr+1)/2+arch.RecordHeaderWords]
		copy(rec, s.words[rb:rb+nw])
		tab := rec[nw:]
		ptrAt := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(tab))), npr)
		refs := unsafe.Slice((*stackRef)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(tab)), npr*4)), nrr)
		k := 0
		for _, i := range s.order[first[r]:first[r+1]] {
			ptrAt[k] = s.ptrAt[i] - rb
			ptrs[ptop+k] = s.ptrs[i]
			k++
		}
		ptop += k
		k = 0
		for _, i := range s.order[first[nrec+1+r]:first[nrec+2+r]] {
			x := s.refAt(int(i) - np)
			refs[k] = stackRef{at: x.at - rb, target: x.target - rb*uint32(wordSize)}
			k++
		}
		outerBP := uint32(arch.NoBP)
		if fe == len(s.frames) {
			if s.outerBP >= 0 {
				outerBP = uint32(s.outerBP) - rb
			}
		} else if f := &s.frames[fe-1]; f.d.hasBP {
			outerBP = (f.fp-2*uint32(wordSize))/uint32(wordSize) - rb
		}
		defers := false
		for i := fs; i < fe; i++ {
			if f := &s.frames[i]; f.d.deferAt >= 0 && *(*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s.words)), uintptr(f.sp)+uintptr(f.d.deferAt))) != 0 {
				defers = true
			}
		}
		bpFirst := s.chainBPs(rec, fs, fe, rb, outerBP)
		*arch.HeaderOf(rec) = arch.RecordHeader{
			Flags:   recordFlags(defers, bpFirst),
			Args:    s.argsOf(fe-1) / uint32(wordSize),
			BP:      s.frames[fs].fp - 2*uint32(wordSize) - rb*uint32(wordSize),
			OuterBP: outerBP,
			PC:      s.frames[fs].pc,
			Refs:    uint32(nrr),
			Frames:  uint32(fe - fs),
			Words:   nw,
			Ptrs:    uint32(npr),
			Len:     uintptr(len(rec)),
		}
		top += len(rec)
	}
	c.MemTop = uintptr(top)
	c.PtrTop = uintptr(ptop)
	if int(c.ptrHigh) > ptop {
		clear(ptrs[ptop:c.ptrHigh]) // pointers of records thawed since
	}
	c.ptrHigh = uint32(ptop)
	if clearedHook != nil {
		clearedHook(c, s.cleared)
	}
}

// chainBPs writes the saved-BP chain of the record of frames [fs, fe)
// into its image (rec, whose first word is region word rb) and returns
// the chain's first word index (record-relative), or 0 if there is no
// chain: outerBP, the record-relative slot of frame fe-1, is arch.NoBP.
// Each frame below fe-1 that saves a BP (they are the outermost ones:
// copyRegion checked that each points at its caller's slot, and zeroed
// it) gets the word index of its caller's slot.
func (s *captureScratch) chainBPs(rec []uintptr, fs, fe int, rb, outerBP uint32) uint32 {
	if outerBP == arch.NoBP {
		return 0
	}
	next := outerBP
	for i := fe - 2; i >= fs && s.frames[i].d.hasBP; i-- {
		w := (s.frames[i].fp-2*uint32(wordSize))/uint32(wordSize) - rb
		rec[w] = uintptr(next)
		next = w
	}
	return next
}

// argsOf returns the bytes of arguments of frame f, the outermost of a
// record: words its record's image ends with.
func (s *captureScratch) argsOf(f int) uint32 {
	if f == len(s.frames)-1 {
		return s.outerArgs
	}
	return uint32(s.frames[f].d.args)
}

// pushOne is push for a capture that is one record, the steady state of a
// yield loop: every pointer and reference is the record's.
func (c *stackChunk) pushOne(s *captureScratch) {
	nw := len(s.words)
	np := len(s.ptrAt)
	nr := len(s.refs) + len(s.weak)
	size := nw + (np+2*nr+1)/2 + arch.RecordHeaderWords
	c.reserve(size, np, false)
	top, ptop := int(c.MemTop), int(c.PtrTop)
	rec, ptrs := c.memory()[top:top+size], c.pointers()
	copy(rec, s.words)
	tab := unsafe.Pointer(&rec[nw])
	copy(unsafe.Slice((*uint32)(tab), np), s.ptrAt)
	copy(ptrs[ptop:ptop+np], s.ptrs)
	refs := unsafe.Slice((*stackRef)(unsafe.Add(tab, np*4)), nr)
	k := copy(refs, s.refs)
	copy(refs[k:], s.weak)
	defers := false
	for i := range s.frames {
		if f := &s.frames[i]; f.d.deferAt >= 0 && *(*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s.words)), uintptr(f.sp)+uintptr(f.d.deferAt))) != 0 {
			defers = true
		}
	}
	outerBP := uint32(arch.NoBP)
	if s.outerBP >= 0 {
		outerBP = uint32(s.outerBP)
	}
	bpFirst := s.chainBPs(rec, 0, len(s.frames), 0, outerBP)
	*arch.HeaderOf(rec) = arch.RecordHeader{
		Flags:   recordFlags(defers, bpFirst),
		Args:    s.outerArgs / uint32(wordSize),
		BP:      s.frames[0].fp - 2*uint32(wordSize),
		OuterBP: outerBP,
		PC:      s.frames[0].pc,
		Refs:    uint32(nr),
		Frames:  uint32(len(s.frames)),
		Words:   uint32(nw),
		Ptrs:    uint32(np),
		Len:     uintptr(size),
	}
	c.MemTop = uintptr(top + size)
	c.PtrTop = uintptr(ptop + np)
	if int(c.ptrHigh) > ptop+np {
		clear(ptrs[ptop+np : c.ptrHigh]) // pointers of records thawed since
	}
	c.ptrHigh = uint32(ptop + np)
	if clearedHook != nil {
		clearedHook(c, s.cleared)
	}
}

// roomFor makes room for t's record in place of the record on top of
// the chunk, which the general capture has just pushed from t's region:
// that record holds only the pointers that were not nil, t's has room for
// every word the maps mark live, and a template that never fits would
// never be used.
func (c *stackChunk) roomFor(t *captureTemplate) {
	top, ptop := int(c.MemTop), int(c.PtrTop)
	h := arch.HeaderOf(c.memory()[:top])
	top0, ptop0 := top-int(h.Len), ptop-int(h.Ptrs)
	if need := top0 + t.words + len(t.tail); need > int(c.memLen) {
		mem := make([]uintptr, need)
		copy(mem, c.memory()[:top])
		c.Mem, c.memLen = unsafe.Pointer(unsafe.SliceData(mem)), uint32(len(mem))
	}
	if need := ptop0 + len(t.ptrWords); need > int(c.ptrsLen) {
		p := make([]unsafe.Pointer, need)
		copy(p, c.pointers()[:ptop])
		c.Ptrs, c.ptrsLen = unsafe.Pointer(unsafe.SliceData(p)), uint32(len(p))
		c.ptrHigh = uint32(ptop)
	}
}

// reserve makes room for words more words of records and ptrs more
// pointers above the chunk's tops, doubling its arrays as needed; with
// fit, arrays that hold no records are replaced by ones of the size asked
// for instead. push fits a capture cut into records: after a small
// region's first resume that capture cuts what its first froze as one
// (wholeRecordWords), and the captures after it, of the records thawed
// since, fit where those were.
func (c *stackChunk) reserve(words, ptrs int, fit bool) {
	top := int(c.MemTop)
	if need := top + words; need > int(c.memLen) {
		if top > 0 || !fit {
			need = max(need, 2*int(c.memLen))
		}
		mem := make([]uintptr, need)
		copy(mem, c.memory()[:top])
		c.Mem, c.memLen = unsafe.Pointer(unsafe.SliceData(mem)), uint32(len(mem))
	}
	ptop := int(c.PtrTop)
	if need := ptop + ptrs; need > int(c.ptrsLen) {
		if ptop > 0 || !fit {
			need = max(need, 2*int(c.ptrsLen))
		}
		p := make([]unsafe.Pointer, need)
		copy(p, c.pointers()[:ptop])
		c.Ptrs, c.ptrsLen = unsafe.Pointer(unsafe.SliceData(p)), uint32(len(p))
		c.ptrHigh = uint32(ptop)
	}
}

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

// sort classifies the live word w of the image: a pointer out of the stack
// is published in the pointers array, a pointer into the region becomes a reference
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

// maxWords bounds the words snapshot copies: 8 GB of them.
const maxWords = 1 << 30

// snapshot copies n stack words from base to dst and returns
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
func snapshot(dst unsafe.Pointer, n int, base unsafe.Pointer, g *rt.G) (lo, gLo, gHi uintptr) {
	// copy compiles to a call of runtime.memmove, which is nosplit and
	// has no safe point: a word-at-a-time loop took twice the
	// instructions. The slices are of array pointers, which costs a
	// bounds check each where unsafe.Slice checks its length for
	// overflow and nil: n is at most a stack's words (the runtime's
	// stacks stop at 1 GB on 64-bit systems, an eighth of maxWords).
	copy((*[maxWords]uintptr)(dst)[:n:n], (*[maxWords]uintptr)(base)[:n:n])
	return uintptr(base), g.StackLo, g.StackHi
}
