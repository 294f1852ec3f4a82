//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file moves runtime defer records with their frames (design.md
// invariant 3). A frame whose defers are not open-coded (a defer in a
// loop, more than eight defers, code built with -N) has a record for each
// pending call, linked from g._defer. The region's records are the newest:
// a prefix of that chain. A capture unlinks them when it commits, and the
// record of the chunk that holds their owner frames carries them. A thaw
// of that record links them back, with their frame's new SP, before its
// frames run again (relinkDefers, from arch.Thaw).
//
// A stack record (deferprocStack) is a stack object of its owner frame,
// copied with the frame. Its fn word is sorted as any pointer word: a heap
// closure goes to the pointers array, a stack closure becomes a reference.
// Its sp and link words are zero in the image; the thaw writes them. A
// heap record (deferproc) stays where it is: the chunk's pointers array
// keeps it, above the record's own pointers, with its link nil.
//
// A record carrying defer records has RecordMoved and RecordDefers set.
// Between its tables and its header it holds one word per defer record,
// oldest first, and then their count. Each word is a movedDefer.

// movedDefer is a record's word for a defer record it carries: the byte
// offsets, in the record's image, of the owner frame's SP and, for a
// stack record, of the record itself (heapAt for a heap record).
type movedDefer struct {
	at uint32
	sp uint32
}

// heapAt marks a movedDefer of a heap record.
const heapAt = ^uint32(0)

// The word indexes of the fields of a defer record that a thaw writes.
const (
	deferSPWord   = unsafe.Offsetof(rt.Defer{}.SP) / wordSize
	deferLinkWord = unsafe.Offsetof(rt.Defer{}.Link) / wordSize
	deferFnWord   = unsafe.Offsetof(rt.Defer{}.Fn) / wordSize
	deferHeadWord = unsafe.Offsetof(rt.Defer{}.Head) / wordSize
)

func init() { arch.RelinkDefers = relinkDefers }

// scratchDefer is a defer record of the region being captured.
type scratchDefer struct {
	heap  *rt.Defer // a heap record, or nil
	at    int32     // a stack record's byte offset from the region's base
	frame int32     // its owner frame's index
}

// collectDefers lists the defer records of the frames of the region
// (whose innermost frame's SP is base) into s.defs, innermost first. They
// must be a prefix of g's chain, each with an owner frame in the region,
// a stack record inside that frame. A range-over-func record, or a heap
// record whose call is a closure on the stack, pins the region.
func (s *captureScratch) collectDefers(g *rt.G, base unsafe.Pointer) error {
	s.defs = s.defs[:0]
	if g.Defer == nil {
		return nil
	}
	// Count first: the second pass, which compares raw addresses, must
	// make no call that could move the stack.
	size := uintptr(s.frames[len(s.frames)-1].fp)
	n := 0
	for d := (*rt.Defer)(g.Defer); d != nil && d.SP-uintptr(base) < size; d = d.Link {
		n++
	}
	if cap(s.defs) < n {
		s.defs = make([]scratchDefer, 0, n+n/2)
	}
	lo := uintptr(base)
	gLo, gHi := g.StackLo, g.StackHi
	d := (*rt.Defer)(g.Defer)
	if d.SP < lo {
		// A frame below the region (the engine's own) has a record: the
		// region's are not the newest.
		return &errPinned{pinning.DeferRecord, s.frames[0].pc}
	}
	for ; d != nil && d.SP-lo < size; d = d.Link {
		off := uint32(d.SP - lo)
		f := s.frameOf(off)
		if f >= int32(len(s.frames)) || s.frames[f].sp != off || d.Rangefunc || d.Head != nil {
			return &errPinned{pinning.DeferRecord, s.framePC(off)}
		}
		x := scratchDefer{at: -1, frame: f}
		if d.Heap {
			if fn := *(*uintptr)(unsafe.Pointer(&d.Fn)); gLo <= fn && fn < gHi {
				return &errPinned{pinning.StackPointer, s.frames[f].pc}
			}
			x.heap = d
		} else {
			at := uintptr(unsafe.Pointer(d)) - lo
			if at < uintptr(s.frames[f].sp) || at+unsafe.Sizeof(rt.Defer{}) > uintptr(s.frames[f].fp) {
				return &errPinned{pinning.DeferRecord, s.frames[f].pc}
			}
			x.at = int32(at)
		}
		s.defs = append(s.defs, x) // within capacity: no call
	}
	// The records past these belong to frames outside the region.
	for ; d != nil; d = d.Link {
		if d.SP < lo+size {
			return &errPinned{pinning.DeferRecord, s.framePC(uint32(d.SP - lo))}
		}
	}
	return nil
}

// clearDeferWords zeroes, in the image, the words of the region's stack
// defer records that the thaw rewrites: their sp, their link (which points
// out of the region, or to a record the thaw links anew) and head (nil:
// collectDefers refused the others).
func (s *captureScratch) clearDeferWords(words []uintptr) {
	for _, x := range s.defs {
		if x.heap == nil {
			w := uintptr(x.at) / wordSize
			words[w+deferSPWord], words[w+deferLinkWord], words[w+deferHeadWord] = 0, 0, 0
		}
	}
}

// sortDeferFns sorts the fn word of each stack defer record as a live
// pointer: the runtime's chain keeps it, not the frame's stack map. It
// returns true if one points into the stack outside the region.
func (s *captureScratch) sortDeferFns(r *region) (pinned bool) {
	for _, x := range s.defs {
		if x.heap == nil && s.sort(r, int32(uintptr(x.at)/wordSize+deferFnWord)) {
			return true
		}
	}
	return false
}

// deferWords returns how many defer records the frames [fs, fe) own, and
// how many of them are on the heap. s.defs is innermost first, so they are
// a run of it.
func (s *captureScratch) deferWords(fs, fe int) (n, heap int) {
	for _, x := range s.defs {
		if int(x.frame) >= fs && int(x.frame) < fe {
			n++
			if x.heap != nil {
				heap++
			}
		}
	}
	return n, heap
}

// putDefers writes the defer records of the frames [fs, fe) into the
// record rec (whose image begins at region byte rb), oldest first, ending
// just before its header, and their heap records into ptrs. It returns the
// header flags to add.
func (s *captureScratch) putDefers(rec []uintptr, ptrs []unsafe.Pointer, fs, fe int, rb uint32) uint32 {
	n, _ := s.deferWords(fs, fe)
	if n == 0 {
		return 0
	}
	end := len(rec) - arch.RecordHeaderWords
	rec[end-1] = uintptr(n)
	w, k := end-1-n, 0
	for i := len(s.defs) - 1; i >= 0; i-- {
		x := &s.defs[i]
		if int(x.frame) < fs || int(x.frame) >= fe {
			continue
		}
		m := movedDefer{at: heapAt, sp: s.frames[x.frame].sp - rb}
		if x.heap != nil {
			ptrs[k] = unsafe.Pointer(x.heap)
			k++
		} else {
			m.at = uint32(x.at) - rb
		}
		rec[w] = uintptr(m.at) | uintptr(m.sp)<<32
		w++
	}
	return arch.RecordMoved | arch.RecordDefers
}

// unlinkDefers removes the region's defer records from g's chain, once
// the capture has committed. A heap record's link, which points out of the
// region, is cleared; the thaw sets it. The records of the frames between
// the region and arch.Enter's go too: arch.JumpBack discards those frames
// (the host's, whose deferred call has a record in code built with -N).
// g._defer becomes the first record of a frame that stays.
func (s *captureScratch) unlinkDefers(g *rt.G) {
	d := (*rt.Defer)(g.Defer)
	if d == nil {
		return
	}
	for range s.defs {
		next := d.Link
		if d.Heap {
			d.Link = nil
		}
		d = next
	}
	// TopOff is 0 only for a chunk no arch.Enter runs (the engine's tests
	// drive capture directly): nothing beyond the region is discarded.
	if top := s.c.TopOff; top != 0 {
		for enter := g.StackHi - top; d != nil && d.SP < enter; {
			d = d.Link
		}
	}
	g.SetDefer(uintptr(unsafe.Pointer(d)))
	for i := range s.defs {
		s.defs[i].heap = nil // the chunk holds them now
	}
}

// relinkDefers is arch.RelinkDefers: it links the defer records of l's
// last record into the calling goroutine's chain, oldest first, so that
// the innermost is the head. The record's frames will lie just beneath
// sp, Thaw's SP. A stack record's sp and link are written in the image,
// which Thaw then copies; the head is its address-to-be. It pops the
// heap records from the pointers array.
//
// It runs with no safe point (arch.RelinkDefers): nosplit, and it calls
// nothing but the write barrier of a heap record's link.
//
//go:nosplit
func relinkDefers(l *arch.Link, sp uintptr) {
	c := (*stackChunk)(unsafe.Pointer(l))
	mem := unsafe.Slice((*uintptr)(c.Mem), c.memLen)
	top := int(c.MemTop)
	h := arch.HeaderOf(mem[:top])
	start := top - int(h.Len)
	base := sp - uintptr(h.Words-h.Args)*wordSize
	end := top - arch.RecordHeaderWords - 1
	n := int(mem[end])
	moved := mem[end-n : end]
	heap := 0
	for _, m := range moved {
		if uint32(m) == heapAt {
			heap++
		}
	}
	ptrs := unsafe.Slice((*unsafe.Pointer)(c.Ptrs), c.ptrsLen)
	k := int(c.PtrTop) - heap
	c.PtrTop = uintptr(k)
	g := rt.CurG()
	for _, m := range moved {
		at, fsp := uint32(m), base+uintptr(m>>32)
		if at == heapAt {
			d := (*rt.Defer)(ptrs[k])
			k++
			d.SP = fsp
			d.Link = (*rt.Defer)(g.Defer)
			g.SetDefer(uintptr(unsafe.Pointer(d)))
			continue
		}
		w := start + int(at/uint32(wordSize))
		mem[w+int(deferSPWord)] = fsp
		mem[w+int(deferLinkWord)] = uintptr(g.Defer)
		g.SetDefer(base + uintptr(at))
	}
}

// deferTableWords returns the words a record of the frames [fs, fe) needs
// for the defer records it carries: one each, and their count.
func (s *captureScratch) deferTableWords(fs, fe int) int {
	if n, _ := s.deferWords(fs, fe); n > 0 {
		return n + 1
	}
	return 0
}
