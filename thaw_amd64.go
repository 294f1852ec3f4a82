//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/weftrt/weft/arch"

	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file drives the stack-copying mechanism from the engine: Run enters
// or thaws a continuation on the calling goroutine, Yield freezes it into
// its chunk and jumps back, and a yield to an enclosing scope freezes each
// continuation on the way out into its own chunk, innermost first.
//
// The calling goroutine's stack, while continuation B runs nested in A,
// both resumed at least once:
//
//	caller of A.Run ... A.Run, scMount, arch.Enter, host, arch.Thaw    (A's boundary: its barrier)
//	A's body ... B.Run, scMount, arch.Enter, host, arch.Thaw           (B's boundary)
//	B's body ... (weft.Yield, capture: not part of the region)
//
// (Before a continuation's first yield its body is called by arch.Enter
// directly, which is then the boundary.) A yield to A's scope captures B's
// region (the frames above B's barrier) into B's chunk and jumps back to
// B's arch.Enter. B's scMount sees that the yield named A, and suspends A
// from where it stands (scSuspend): A's region now ends in B's scMount,
// and goes into A's chunk. Resuming A thaws A's innermost record; B's
// scMount then continues its loop and thaws B's, and B's Yield returns.

// stackCopyBuilt reports whether this build has the stack-copying backend.
const stackCopyBuilt = true

// scMount is Run, into which it inlines: on this backend mounted, resume
// and scResume in one frame (on the portable backend it only calls
// acquire). After every yield, arch.JumpBack arrives in arch.Enter by a
// jump, and each frame between Enter and Run's caller is then returned
// through with the CPU's return prediction wrong: the fewer frames there,
// the faster a round trip.
//
// Each pass binds c to the goroutine (gls.Push) and sets c.parentC to the
// record it replaced, so that c.parentC's Local is always what the
// unbinding puts back (scAborted relies on it).
//
//go:noinline
func (c *Cont) scMount(owner any) {
	if !useStackCopy || !c.state.CompareAndSwap(int32(stSuspended), int32(stMounted)) {
		// Not the usual resume: a first Run, a misuse, or the portable
		// backend.
		if !c.acquire(owner) {
			return
		}
	}
	c.owner = owner
	s := &c.sc
	slot, prev := gls.Push(&c.local)
	if c.counted {
		cc := (*countedCont)(unsafe.Pointer(c))
		bump(&cc.n.runs, 1) // countRun, on this backend
		// mountLabels, unless the goroutine's labels are already the
		// body's and the ones that scUnmount is to put back (none, say).
		if l := profLabel(); l != cc.outer || l != cc.labels {
			c.mountLabels(l)
		}
	}
	normal := false
	defer func() {
		if !normal { // the body panicked or called runtime.Goexit
			c.scAborted()
		}
	}()
	for {
		c.parentC = contOf(prev) // nil if prev is
		c.parentResolved = true
		// Every pass mounts c anew, perhaps on another thread (after a
		// yield to an enclosing scope, the enclosing continuation may
		// have been resumed anywhere).
		c.local.Locks = rt.CurLockCount()
		s.yielded = false
		if !s.started {
			s.started = true
			arch.Enter(&s.chunk.Link, s.body)
		} else {
			s.prepareThaw()
			arch.Enter(&s.chunk.Link, s.host)
			if s.rethrow {
				s.rethrowLoop()
			}
		}
		// scUnmount, written out: a call costs more than an uncounted
		// record's unmount.
		if c.counted {
			c.unmountCounted()
		}
		s.chunk.Thawed, s.chunk.unwound = 0, 0
		slot.Pop(prev)
		if !s.yielded {
			s.done = true
			normal = true
			c.finish()
			return
		}
		if c.target == c {
			break
		}
		c.scNested()
		slot, prev = gls.Push(&c.local)
		if c.counted { // as at the first pass
			if cc, l := (*countedCont)(unsafe.Pointer(c)), profLabel(); l != cc.outer || l != cc.labels {
				c.mountLabels(l)
			}
		}
	}
	if c.counted || c.child != nil {
		c.countYields()
	}
	normal = true
	if r := s.rare; r != nil {
		r.dropCrossed() // the panic it recorded is over
	}
	c.owner = nil
	c.state.Store(int32(stSuspended))
}

// scAborted ends c, whose body panicked or called runtime.Goexit while
// scMount ran it: it unbinds c if it is still bound (the unwinding may
// have begun between an unbinding and the next binding, in a yield to an
// enclosing scope), and hands on the panic c's barrier recorded. Only
// scMount's deferred call calls it, on the calling goroutine.
//
//go:noinline
func (c *Cont) scAborted() {
	if l := gls.Current(); l == &c.local {
		// The goroutine's slot, from binding c again, and what the
		// binding replaced, which scMount kept in c.parentC.
		slot, _ := gls.Push(l)
		c.scUnmount(slot, (*gls.Local)(unsafe.Pointer(c.parentC)))
	}
	c.handCrossed()
	c.finish()
}

// handCrossed gives the panic c's barrier recorded (scRare.crossed) to
// the continuation whose body mounted c, as c ends by a panic: if that
// panic is the one raised again at c's barrier, it goes on into the
// parent's frames, and may reach the parent's barrier raised again, as
// far as that barrier can tell. It also keeps it for the deferred calls
// of Run's caller, which see it raised again too, without the frames
// where it began: c.pt, which this backend does not otherwise use, holds
// it past finish (which drops c.sc.rare) for scPanicStack, as the
// portable backend keeps the panic that ended a body for Run's caller.
func (c *Cont) handCrossed() {
	r, p := c.sc.rare, c.parentC
	if r == nil || r.crossedStack == nil {
		return
	}
	c.pt = &portableState{panicked: r.crossed, panicStack: r.crossedStack}
	if p == nil {
		return
	}
	pr := p.sc.rareState()
	pr.crossed, pr.crossedStack = r.crossed, r.crossedStack
}

// scResume runs c on the calling goroutine until its body finishes (true)
// or it is suspended by a yield to its own scope (false). scCancel uses it;
// Run uses scMount.
func (c *Cont) scResume() (finished bool) {
	s := &c.sc
	for {
		c.scOnce()
		if !s.yielded {
			return true
		}
		if c.target == c {
			c.countYields()
			return false
		}
		c.scNested()
	}
}

// scNested handles a yield of c that named an enclosing scope: c's frames
// are in its chunk, and this goroutine is back in the parent's body, which
// must be suspended too, from here, with c inside it. It returns when the
// parent is resumed (perhaps on another goroutine), and c is to be thawed
// again.
func (c *Cont) scNested() {
	s := &c.sc
	p := c.parentC
	p.child = c
	cancelled, pe := p.scSuspend(c.target)
	p.child = nil
	switch {
	case pe != nil:
		// The enclosing region cannot be frozen: thaw c again, and its
		// Yield returns the reason.
		s.rareState().pinErr = pe
	case cancelled:
		// The parent was abandoned while suspended: c unwinds too.
		c.state.Store(int32(stCancelling))
		s.cancel = true
	}
}

// scOnce mounts c on the calling goroutine for one enter or thaw, and
// unmounts it when c yields or its body returns, panics or exits.
func (c *Cont) scOnce() {
	slot, prev := gls.Push(&c.local)
	c.parentC = nil
	if prev != nil {
		c.parentC = contOf(prev)
	}
	c.parentResolved = true
	if c.counted {
		c.mountLabels(profLabel())
	}
	defer c.scUnmount(slot, prev)
	c.sc.run()
}

// scUnmount undoes scOnce's binding, the body's profiler labels included
// (mountLabels), and counts what arch.Thaw thawed (an uncounted record
// only zeroes those counts). scMount has it written out.
func (c *Cont) scUnmount(slot gls.Slot, prev *gls.Local) {
	if c.counted {
		c.unmountCounted()
	}
	k := &c.sc.chunk
	k.Thawed, k.unwound = 0, 0
	slot.Pop(prev)
}

// unmountCounted is scUnmount's part for a counted record: the labels,
// and the counts of what arch.Thaw thawed and of the unwinds.
//
//go:noinline
func (c *Cont) unmountCounted() {
	// unmountLabels's fast path, written out: the goroutine's labels
	// are still the body's, which are the goroutine's own.
	cc := (*countedCont)(unsafe.Pointer(c))
	if now := profLabel(); now != cc.outer || now != cc.labels {
		c.unmountLabels(now)
	}
	k, n := &c.sc.chunk, &cc.n
	if t := k.Thawed; t != 0 {
		bump(&n.framesThawed, uint64(t>>32))
		bump(&n.bytesThawed, uint64(uint32(t))*uint64(wordSize))
	}
	if u := k.unwound; u != 0 {
		bump(&n.unwinds, uint64(u))
	}
}

// bump adds n to a counter of a continuation that the calling goroutine
// has mounted: the counter's only writer. It is a plain load and store,
// not a locked add (a round trip bumps six counters); Stats reads the
// counters with atomic loads, which on amd64 see either the old or the new
// value of an aligned word.
func bump(p *atomic.Uint64, n uint64) {
	w := (*uint64)(unsafe.Pointer(p))
	*w += n
}

// froze counts a capture of frames frames and bytes bytes of stack, which
// took the fast path if templated, if n is not nil.
func (n *counters) froze(frames int, bytes uintptr, templated bool) {
	if n == nil {
		return
	}
	bump(&n.framesFrozen, uint64(frames))
	bump(&n.bytesFrozen, uint64(bytes))
	if templated {
		bump(&n.templated, 1)
	}
}

// countYields counts, once the whole freeze has succeeded, a yield of c
// and of every continuation suspended inside it. (Each capture counted
// what it froze as it froze it: a freeze that fails in an enclosing
// continuation after the inner ones were captured still copied their
// frames, and thaws them back.)
func (c *Cont) countYields() {
	for x := c; x != nil; x = x.child {
		if n := x.counters(); n != nil {
			bump(&n.yields, 1)
		}
	}
}

// scSuspend freezes c, from its caller's frame up to c's return barrier or
// entry trampoline, as part of a yield to t that an inner continuation
// made, and returns when c is thawed: cancelled if c was abandoned
// meanwhile and must unwind. If c cannot be frozen, it returns at once
// with the reason, and nothing is suspended. weft.Yield freezes the
// continuation it suspends first from its own caller's frame instead
// (scCont.leave).
//
//go:noinline
func (c *Cont) scSuspend(t *Cont) (cancelled bool, pe *errPinned) {
	c.target = t
	return c.sc.settle(c.sc.chunk.capture(scEntry, false, c.counters()))
}

// scEntry is the entry PC of arch.Enter, the boundary of every region.
var scEntry = arch.EnterPC()

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
func (s *scCont) takePinErr() *errPinned {
	pe := s.rare.pinErr
	s.rare.pinErr = nil
	return pe
}

// scTrace returns the frozen frames of c and of the continuations
// suspended inside it, innermost first, as StackTrace reports them.
func (c *Cont) scTrace() []runtime.Frame {
	var frames []runtime.Frame
	if ch := c.child; ch != nil {
		frames = ch.scTrace()
	}
	k := &c.sc.chunk
	pcs := make([]uintptr, 0, k.frozenFrames())
	for _, f := range k.frames() {
		pcs = f.d.fn.LogicalPCs(f.pc, pcs) // one PC per logical frame
	}
	return append(frames, userFrames(pcs)...)
}

// scCancel thaws an abandoned continuation on the calling goroutine and
// unwinds it: its Yield calls runtime.Goexit, which runs the deferred calls
// of its frames and then ends the calling goroutine.
func (c *Cont) scCancel() {
	c.state.Store(int32(stCancelling))
	c.sc.cancel = true
	c.scResume()
}

// pinnedFrom converts a failed capture into the error Yield returns.
func (t *Cont) pinnedFrom(pe *errPinned) *pinning.Error {
	return t.pinnedYield(pe.reason, pe.pc)
}

// countRun counts a Run: with a plain add on this backend, where only the
// mounting goroutine writes the counters.
func (c *Cont) countRun() {
	n := c.counters()
	switch {
	case n == nil:
	case useStackCopy:
		bump(&n.runs, 1)
	default:
		n.runs.Add(1)
	}
}
