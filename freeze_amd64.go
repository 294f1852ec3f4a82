//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file is the stack-copying freeze. It captures a continuation's
// region, then jumps back to its arch.Enter, or reports why nothing was
// suspended. The resume "returns" from the capture again. capture's fast
// path (fastCapture) and the copy (snapshot) are here. The general walk is
// in capture_amd64.go, the templates in template_amd64.go.

// stackYield suspends the running stackState. It captures the frames from
// its own up to arch.Enter's and jumps back. On the thaw the capture call
// "returns" again, with c.resumed set, and stackYield returns true. It
// returns false, suspending nothing, if the region cannot be captured.
//
//go:noinline
func stackYield(c *stackState) bool {
	err := c.chunk.capture(enterPC, false, hooks.yieldCounts)
	if c.resumed {
		c.resumed = false
		return true
	}
	if err != nil {
		c.rareState().err = err
		return false
	}
	c.yielded, c.elided = true, false
	arch.JumpBack(c.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// settle finishes a capture that its caller made of its own frame; the
// capture call is settle's argument. Right after the capture it jumps
// back, or reports why nothing was suspended. On the thaw the capture
// call "returns" again, and settle reports why the continuation resumed.
// cancelled: it was abandoned and must unwind. pe: the freeze of an
// enclosing continuation failed.
func (s *stackState) settle(err error) (cancelled bool, pe *errPinned) {
	if s.resumed {
		s.resumed = false
		if s.rare != nil && s.rare.pinErr != nil {
			return false, s.takePinErr()
		}
		return s.cancel, nil
	}
	if err != nil {
		return false, refused(err)
	}
	s.yielded, s.elided = true, false
	arch.JumpBack(s.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// leave finishes a capture that weft.Yield made from its caller's frame;
// the capture call is leave's argument. It jumps back, or reports why
// nothing was suspended. The capture call never "returns" again. The
// resume continues Yield's caller instead (thawYield, yieldReturn).
func (s *stackState) leave(err error) *errPinned {
	if err != nil {
		return refused(err)
	}
	s.yielded, s.elided = true, true
	arch.JumpBack(s.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// countYields counts a yield of c and of every continuation suspended
// inside it, once the whole freeze has succeeded. Each capture counts the
// frames it froze itself: a freeze that fails in an enclosing continuation
// has still copied the inner ones, and thaws them back.
func (c *Cont) countYields() {
	for x := c; x != nil; x = x.child {
		if n := x.counters(); n != nil {
			bump(&n.yields, 1)
		}
	}
}

// freezeNested freezes c, from its caller's frame up to c's return barrier
// or entry trampoline, for an inner continuation's yield to t. It returns
// when c is thawed: cancelled if c was abandoned meanwhile and must
// unwind. If c cannot be frozen, it returns at once with the reason, and
// nothing is suspended. Yield freezes the innermost continuation from its
// own caller's frame instead (stackState.leave).
//
//go:noinline
func (c *Cont) freezeNested(t *Cont) (cancelled bool, pe *errPinned) {
	c.target = t
	return c.stack.settle(c.stack.chunk.capture(enterPC, false, c.counters()))
}

// enterPC is the entry PC of arch.Enter, the boundary of every region.
var enterPC = arch.EnterPC()

// refused returns why a capture refused to suspend, err, as a pinning.
//
//go:noinline
func refused(err error) *errPinned {
	if e, ok := err.(*errPinned); ok {
		return e
	}
	// capture refused for a reason that is not about one frame (the
	// engine's own frames are not what it expects): nothing was
	// suspended, so the yield is pinned rather than lost.
	return &errPinned{pinning.UnknownFrame, 0}
}

//go:noinline
func (s *stackState) takePinErr() *errPinned {
	pe := s.rare.pinErr
	s.rare.pinErr = nil
	return pe
}

// pinnedFrom converts a failed capture into the error Yield returns.
func (t *Cont) pinnedFrom(pe *errPinned) *pinning.Error {
	return t.pinnedYield(pe.reason, pe.pc)
}

// capture freezes into c the frames from its caller's frame up to the
// boundary, not included. The caller's frame continues right after this
// call. The boundary is the innermost frame of the function whose entry
// PC is boundary, or of arch.Thaw, the return barrier under frames thawed
// from c. With skip, the region starts at the caller's caller, which
// continues where the caller returns. The caller is then weft.Yield, whose
// frame holds nothing a resume needs: it is neither kept nor copied.
//
// Frames above a barrier become new records on top of those still frozen.
// Frames above boundary replace c's records. capture returns an
// *errPinned if the region cannot be frozen, and another error if the
// walk finds no boundary frame; c is unchanged then. A capture that
// succeeds counts what it froze in n, if n is not nil.
//
// The stack may move whenever capture calls anything. So capture keeps
// positions as unsafe.Pointers in its own frame, which the runtime
// relocates, or as offsets. It compares raw stack addresses only with
// bounds computed in the same stretch of code without calls.
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
			if freezeProf.rate.Load() != 0 {
				c.profileFreeze(t.nf, t.frozenBytes(), true)
			}
			return nil
		}
		// Another chain than the last capture's may have a template too.
		// It is above the barrier: none has more frames than the most
		// any such template has.
		if o := templateAt(pc, sp, skip, int(barrierTemplateFrames.Load())); o != nil && o != t && !o.fresh && c.fastCapture(o, pc, sp, skip) {
			c.tmpl = o
			n.froze(o.nf, o.frozenBytes(), true)
			if freezeProf.rate.Load() != 0 {
				c.profileFreeze(o.nf, o.frozenBytes(), true)
			}
			return nil
		}
	} else if c.memLen == 0 {
		// The chunk's first capture, its arrays not yet made: another
		// continuation may have published the template of a body's
		// frames from its start. (A record reset keeps its arrays: its
		// first capture takes the general path.)
		if t := templateAt(pc, sp, skip, maxTemplateFrames); t != nil && t.fresh {
			c.roomFor(t)
			if c.fastCapture(t, pc, sp, skip) {
				c.tmpl = t
				n.froze(t.nf, t.frozenBytes(), true)
				if freezeProf.rate.Load() != 0 {
					c.profileFreeze(t.nf, t.frozenBytes(), true)
				}
				return nil
			}
		}
	}
	s := scratchPool.Get().(*captureScratch)
	s.c = c
	err := c.captureIn(s, boundary, pc, sp, skip)
	if err == nil {
		n.froze(len(s.frames), uintptr(len(s.words))*wordSize-uintptr(s.outerArgs), false)
		if freezeProf.rate.Load() != 0 {
			c.profileFreeze(len(s.frames), uintptr(len(s.words))*wordSize-uintptr(s.outerArgs), false)
		}
		c.tmpl = s.templateFor()
		if c.tmpl != nil {
			c.roomFor(c.tmpl)
		}
	}
	putScratch(s)
	return err
}

// fastCapture captures the region above the return barrier with the
// template t. pc and sp are capture's own; skip says whether capture
// leaves out its caller's frame. It reports false, having committed
// nothing, if the region does not match t or holds something t does not
// cover. The general path then captures it.
//
// It keeps design.md invariants 1 to 4 as captureIn does. t's chain of
// PCs fixes the frames (1). A live word pointing into the stack, or a
// defer record, sends the region to the general path (2, 3). No call that
// could move the stack lies between the walk and the copy (4): snapshot
// is nosplit, and pointers are read again from the live stack through
// base. Every index into the chunk's arrays comes from t, made for a
// record of t's size, and lies within the room checked first.
func (c *stackChunk) fastCapture(t *captureTemplate, pc uintptr, sp unsafe.Pointer, skip bool) bool {
	if pc != t.selfPC || skip != (t.skipPC != 0) {
		return false
	}
	pc = *(*uintptr)(unsafe.Add(sp, t.selfSize-8))
	sp = unsafe.Add(sp, t.selfSize)
	if skip {
		if pc != t.skipPC {
			return false
		}
		pc = *(*uintptr)(unsafe.Add(sp, t.skipSize-8))
		sp = unsafe.Add(sp, t.skipSize)
	}
	base := sp
	pcs := t.pcs[:t.nf]
	sizes := t.sizes[:len(pcs)]
	for i, want := range pcs {
		if pc != want {
			return false
		}
		pc = *(*uintptr)(unsafe.Add(sp, sizes[i]-8))
		sp = unsafe.Add(sp, sizes[i])
	}
	if pc != t.stopPC || *(*unsafe.Pointer)(unsafe.Add(sp, t.stopSize)) != unsafe.Pointer(&c.Link) {
		return false
	}
	g := rt.CurG()
	if g.Defer != nil {
		return false // captureIn checks defer records
	}

	// Room, beyond the chunk's top: nothing is committed until the end.
	// A fresh template's region starts at the body: the chunk must hold
	// no record, which captureIn would replace (capture). c.tmpl may be
	// fresh while records lie under the barrier, so this is checked.
	top, ptop := uintptr(c.MemTop), uintptr(c.PtrTop)
	if t.fresh && (top != 0 || ptop != 0) {
		return false
	}
	size, np := uintptr(t.size), uintptr(t.ptrs)
	if top+size > uintptr(c.memLen) || ptop+np > uintptr(c.ptrsLen) {
		return false
	}
	if len(t.recs) == 1 && !hooks.recordLoop {
		// One record, the steady state of a yield loop. This must match
		// the loop below for one record, written out for speed (a round
		// trip's capture costs about 50 instructions less);
		// TestFastCaptureOneRecordMatchesLoop compares the records each
		// writes.
		tr := &t.recs[0]
		im := unsafe.Add(c.Mem, top*wordSize) // the record, its image first
		lo, gLo, gHi := snapshot(im, int(tr.nw), base, g)
		for _, l := range tr.links {
			p := (*uintptr)(unsafe.Add(im, uintptr(l.at)*wordSize))
			if *p != lo+uintptr(l.next)*wordSize {
				return false
			}
			*p = uintptr(l.next)
		}
		ptrs, span := unsafe.Add(c.Ptrs, ptop*wordSize), gHi-gLo
		for k, w := range tr.ptrWords {
			off := uintptr(w) * wordSize
			if *(*uintptr)(unsafe.Add(im, off))-gLo < span { // a pointer into the stack
				for j := range k {
					*(*unsafe.Pointer)(unsafe.Add(ptrs, uintptr(j)*wordSize)) = nil
				}
				return false
			}
			*(*unsafe.Pointer)(unsafe.Add(ptrs, uintptr(k)*wordSize)) = *(*unsafe.Pointer)(unsafe.Add(base, off))
			*(*uintptr)(unsafe.Add(im, off)) = 0
		}
		tail := tr.tail
		copy((*[maxWords]uintptr)(unsafe.Add(im, uintptr(tr.nw)*wordSize))[:len(tail):len(tail)], tail)
		for _, off := range tr.deferAt {
			if *(*byte)(unsafe.Add(im, off)) != 0 {
				arch.HeaderEnding(unsafe.Add(im, size*wordSize)).Flags |= arch.RecordDefers
				c.deferred = true
			}
		}
	} else if !c.fastRecords(t, base, g, top, ptop) {
		return false
	}
	c.MemTop = top + size
	c.PtrTop = ptop + np
	if high := uintptr(c.ptrHigh); high > ptop+np {
		// Pointers of records thawed since.
		for j := ptop + np; j < high; j++ {
			*(*unsafe.Pointer)(unsafe.Add(c.Ptrs, j*wordSize)) = nil
		}
	}
	c.ptrHigh = uint32(ptop + np)
	return true
}

// fastRecords is fastCapture's copy of the region into t's records, above
// the chunk's top and ptop, without committing them. It reports false,
// having left nothing in the pointer array, if a value is not what t
// covers.
//
// The records lie outermost first. Each image is copied at one stack
// position (snapshot). No call between the walk and the last copy can
// move the stack: fastRecords is nosplit, and calls only snapshot and
// memmove, which are too. The saved frame pointers are chained
// by word index, each the next one's slot (see arch.RecordHeader). The
// pointer words move to the chunk's pointer array, each read again from
// the live stack as a pointer (the collector sees the store), and are
// zeroed in the image, as are the words of the next inner record's live
// arguments. (With no pointers, and the pointer array full, ptrs points
// just past the array: it is then never used, and dead at every call.)
//
//go:nosplit
func (c *stackChunk) fastRecords(t *captureTemplate, base unsafe.Pointer, g *rt.G, top, ptop uintptr) bool {
	ptrs, k := unsafe.Add(c.Ptrs, ptop*wordSize), uintptr(0)
	at := top
	for i := range t.recs {
		tr := &t.recs[i]
		im := unsafe.Add(c.Mem, at*wordSize)
		rbase := unsafe.Add(base, uintptr(tr.rb)*wordSize)
		lo, gLo, gHi := snapshot(im, int(tr.nw), rbase, g)
		for _, l := range tr.links {
			p := (*uintptr)(unsafe.Add(im, uintptr(l.at)*wordSize))
			if *p != lo+uintptr(l.next)*wordSize {
				for j := range k {
					*(*unsafe.Pointer)(unsafe.Add(ptrs, j*wordSize)) = nil
				}
				return false
			}
			*p = uintptr(l.next)
		}
		span := gHi - gLo
		for _, w := range tr.ptrWords {
			off := uintptr(w) * wordSize
			if *(*uintptr)(unsafe.Add(im, off))-gLo < span { // a pointer into the stack
				for j := range k {
					*(*unsafe.Pointer)(unsafe.Add(ptrs, j*wordSize)) = nil
				}
				return false
			}
			*(*unsafe.Pointer)(unsafe.Add(ptrs, k*wordSize)) = *(*unsafe.Pointer)(unsafe.Add(rbase, off))
			*(*uintptr)(unsafe.Add(im, off)) = 0
			k++
		}
		for _, w := range tr.overlap {
			*(*uintptr)(unsafe.Add(im, uintptr(w)*wordSize)) = 0
		}
		// The tables and the header.
		tail := tr.tail
		copy((*[maxWords]uintptr)(unsafe.Add(im, uintptr(tr.nw)*wordSize))[:len(tail):len(tail)], tail)
		end := uintptr(tr.nw) + uintptr(len(tail))
		for _, off := range tr.deferAt {
			if *(*byte)(unsafe.Add(im, off)) != 0 {
				arch.HeaderEnding(unsafe.Add(im, end*wordSize)).Flags |= arch.RecordDefers
				c.deferred = true
			}
		}
		at += end
	}
	return true
}

// snapshot copies n stack words from base to dst. It returns base and g's
// stack bounds as integers, all at one stack position (design.md
// invariant 4). It is a nosplit function of its own, never inlined, so the
// stack cannot grow while it runs. Only an asynchronous preemption can
// stop it, and the runtime never moves a stack stopped so. The race
// detector and checkptr would insert calls, so both are off here.
//
//go:noinline
//go:nosplit
//go:norace
//go:nocheckptr
func snapshot(dst unsafe.Pointer, n int, base unsafe.Pointer, g *rt.G) (lo, gLo, gHi uintptr) {
	// copy calls runtime.memmove, which is nosplit and has no safe
	// point. The slices are of array pointers: n is at most a stack's
	// words, and the runtime's stacks stop at 1 GB on 64-bit systems,
	// an eighth of maxWords.
	copy((*[maxWords]uintptr)(dst)[:n:n], (*[maxWords]uintptr)(base)[:n:n])
	return uintptr(base), g.StackLo, g.StackHi
}
