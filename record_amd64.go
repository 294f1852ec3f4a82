//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// This file is the chunk and its records: push encodes a capture into
// records, recordEnding decodes one. The header's layout is
// arch.RecordHeader.

// stackChunk holds a continuation's frozen frames, like Loom's stack
// chunk: two heap arrays, one of scalar words and one of live pointers.
// The frames are kept as a stack of records (arch.Link describes the
// layout). Each record is a run of frames that can be thawed on its own,
// the innermost record last. Thaw copies back only the last record and
// leaves a return barrier under it (arch.Thaw). A capture freezes only the
// frames above the barrier, the ones thawed since, and pushes them as new
// records. So a round trip copies a record or two, whatever the depth.
type stackChunk struct {
	arch.Link // first: the assembly reads it

	// Link.Mem is the array of memLen words (memory) that holds the
	// records. A record is an image of its frames, its tables and its
	// header. In the image, the words that held live pointers or pointers
	// into the record are zero: those are in the pointers array and the
	// record's references. Dead pointer slots keep their stale values as
	// plain integers, which the GC never follows.
	//
	// Link.Ptrs is the array of ptrsLen pointers (pointers) that holds the
	// records' live pointers to memory outside the stack. Each is
	// published to the GC exactly once. Its elements
	// [PtrTop:ptrHigh] may still hold the pointers of records thawed since
	// the last capture, which clears them.
	//
	// The arrays are kept through Link's pointers alone, not slices: a
	// record per continuation, and every parked virtual thread has one.
	memLen, ptrsLen, ptrHigh uint32

	// unwound counts the panics and Goexits carried into frozen frames
	// since the engine last read it (stackState.crossing); it is here, and not
	// in the stackState, because it fills what would be padding.
	unwound uint16
	// deferred is set when a record with deferred calls pending
	// (arch.RecordDefers) is committed, and cleared when the body ends
	// (stackState.finished). A suspended continuation whose chunks never
	// had one needs no Abandon (Handler.Abandonable).
	deferred bool

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

type stackRef struct {
	at     uint32 // word index in the chunk
	target uint32 // byte offset from the region's base
}

type chunkFrame struct {
	pc     uintptr    // where the frame continues
	sp, fp uint32     // byte offsets of its SP and FP from the region's base
	d      *frameDesc // its description
}

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
		total += nw + int(s.count[2*r]+2*s.count[2*r+1]+1)/2 + arch.RecordHeaderWords + s.deferTableWords(fs, fe)
	}
	np := len(s.ptrAt)
	_, nheap := s.deferWords(0, len(s.frames))
	c.reserve(total, np+nheap, true)
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
		rec := mem[top : top+int(nw)+(npr+2*nrr+1)/2+s.deferTableWords(fs, fe)+arch.RecordHeaderWords]
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
		_, nh := s.deferWords(fs, fe)
		moved := s.putDefers(rec, ptrs[ptop:ptop+nh], fs, fe, rb*uint32(wordSize))
		ptop += nh
		*arch.HeaderOf(rec) = arch.RecordHeader{
			Flags:   recordFlags(defers, bpFirst) | moved,
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
		if defers || moved != 0 {
			c.deferred = true
		}
		top += len(rec)
	}
	c.MemTop = uintptr(top)
	c.PtrTop = uintptr(ptop)
	if int(c.ptrHigh) > ptop {
		clear(ptrs[ptop:c.ptrHigh]) // pointers of records thawed since
	}
	c.ptrHigh = uint32(ptop)
	if hooks.cleared != nil {
		hooks.cleared(c, s.cleared)
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
	_, nh := s.deferWords(0, len(s.frames))
	size := nw + (np+2*nr+1)/2 + s.deferTableWords(0, len(s.frames)) + arch.RecordHeaderWords
	c.reserve(size, np+nh, false)
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
	moved := s.putDefers(rec, ptrs[ptop+np:ptop+np+nh], 0, len(s.frames), 0)
	*arch.HeaderOf(rec) = arch.RecordHeader{
		Flags:   recordFlags(defers, bpFirst) | moved,
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
	if defers || moved != 0 {
		c.deferred = true
	}
	np += nh
	c.MemTop = uintptr(top + size)
	c.PtrTop = uintptr(ptop + np)
	if int(c.ptrHigh) > ptop+np {
		clear(ptrs[ptop+np : c.ptrHigh]) // pointers of records thawed since
	}
	c.ptrHigh = uint32(ptop + np)
	if hooks.cleared != nil {
		hooks.cleared(c, s.cleared)
	}
}

// roomFor makes room for t's records in place of the records on top of
// the chunk, or in an empty chunk. The general capture has just pushed
// those records from t's region. They hold only the pointers that were not
// nil; t's records have room for every word the maps mark live. A
// template that never fits would never be used.
func (c *stackChunk) roomFor(t *captureTemplate) {
	top, ptop := int(c.MemTop), int(c.PtrTop)
	top0, ptop0 := top, ptop
	for range t.recs {
		if top0 == 0 {
			break
		}
		h := arch.HeaderOf(c.memory()[:top0])
		top0, ptop0 = top0-int(h.Len), ptop0-int(h.Ptrs)
	}
	if need := top0 + t.size; need > int(c.memLen) {
		mem := make([]uintptr, need)
		copy(mem, c.memory()[:top])
		c.Mem, c.memLen = unsafe.Pointer(unsafe.SliceData(mem)), uint32(len(mem))
	}
	if need := ptop0 + t.ptrs; need > int(c.ptrsLen) {
		p := make([]unsafe.Pointer, need)
		copy(p, c.pointers()[:ptop])
		c.Ptrs, c.ptrsLen = unsafe.Pointer(unsafe.SliceData(p)), uint32(len(p))
		c.ptrHigh = uint32(ptop)
	}
}

// reserve makes room for words more words of records and ptrs more
// pointers above the chunk's tops, doubling its arrays as needed. With
// fit, arrays that hold no records are replaced by ones of the size asked
// for instead. push fits a capture cut into records. Such a capture
// follows a small region's first resume, and cuts what the first capture
// froze as one record (wholeRecordWords). The captures after it, of the
// records thawed since, fit where those were.
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
