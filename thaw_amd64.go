//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/proflabel"
	"github.com/weftrt/weft/internal/rt"
)

// This file is the stack-copying backend's mount loop. Run enters or
// thaws a continuation on the calling goroutine. A yield to an enclosing
// scope freezes each continuation on the way out into its own chunk,
// innermost first.
//
// The calling goroutine's stack, while continuation B runs nested in A,
// both resumed at least once:
//
//	caller of A.Run ... A.Run, mount, arch.Enter, host, arch.Thaw    (A's boundary: its barrier)
//	A's body ... B.Run, mount, arch.Enter, host, arch.Thaw           (B's boundary)
//	B's body ... (weft.Yield, capture: not part of the region)
//
// Before a continuation's first yield, arch.Enter calls its body directly
// and is the boundary. A yield to A's scope captures B's region, the
// frames above B's barrier, into B's chunk and jumps back to B's
// arch.Enter. B's mount sees that the yield named A, and suspends A from
// where it stands (freezeNested). A's region now ends in B's mount, and
// goes into A's chunk. Resuming A thaws A's innermost record. B's mount
// then continues its loop and thaws B's, and B's Yield returns.

// stackCopyBuilt reports whether this build has the stack-copying backend.
const stackCopyBuilt = true

// mount is the one mount loop of the stack-copying backend. It runs c on
// the calling goroutine until c's body ends or c yields to its own scope.
// Run calls it; on the portable backend it only calls acquire. Abandon
// calls it with owner abandoning{}, on a fresh goroutine. c is then
// cancelling and marked abandoned (stackRare.abandoned). c's Yield
// unwinds c's frames, and mount finishes c however the unwinding ends.
//
// No frame lies between Run's caller and mount: Run inlines. After every
// yield, arch.JumpBack arrives in arch.Enter by a jump, and each frame
// from Enter to Run's caller returns with the CPU's return prediction
// wrong. Fewer frames there make a round trip faster.
//
// Each pass binds c to the goroutine (gls.SlotG and Slot.Push) and sets
// c.parentC to the record it replaced. So c.parentC's Local is always what
// the unbinding puts back (aborted relies on it).
//
//go:noinline
func (c *Cont) mount(owner any) {
	runs := uint64(1) // what this mount adds to the Runs count
	if !useStackCopy || !c.state.CompareAndSwap(int32(stSuspended), int32(stMounted)) {
		// Not the usual resume: an abandonment, a first Run, a misuse,
		// or the portable backend.
		if _, ok := owner.(abandoning); ok && useStackCopy {
			// An abandonment is no Run, and c.owner stays nil.
			runs = 0
			goto mounted
		}
		if !c.acquire(owner) {
			return
		}
	}
	c.owner = owner
mounted:
	s := &c.stack
	g := rt.CurG()
	slot := gls.SlotG(unsafe.Pointer(g))
	prev := slot.Push(&c.local)
	if c.counted {
		cc := (*countedCont)(unsafe.Pointer(c))
		bump(&cc.n.runs, runs)
		// mountLabels, unless the goroutine's labels are already the
		// body's and the ones that unmount is to put back (none, say).
		if l := proflabel.Get(); l != cc.outer || l != cc.labels {
			c.mountLabels(l)
		}
	}
	normal := false
	defer func() {
		if !normal { // the body panicked or called runtime.Goexit
			c.aborted()
		}
	}()
	for {
		c.parentC = contOf(prev) // nil if prev is
		c.parentResolved = true
		// Every pass mounts c anew, perhaps on another thread (after a
		// yield to an enclosing scope, the enclosing continuation may
		// have been resumed anywhere).
		c.local.Locks = g.LockCount()
		// One pass: must match stackState.run (TestMountPassMatchesRun).
		s.yielded = false
		if !s.started {
			s.started = true
			arch.Enter(&s.chunk.Link, s.body)
		} else {
			s.prepareThaw()
			arch.Enter(&s.chunk.Link, host)
			if s.rethrow {
				s.rethrowLoop()
			}
		}
		// unmount, written out: an uncounted record's unmount is cheaper
		// than a call.
		if c.counted {
			c.unmountCounted()
		}
		s.chunk.Thawed, s.chunk.unwound = 0, 0
		slot.Pop(prev)
		if !s.yielded {
			s.done = true
			if freezeProf.rate.Load() != 0 {
				s.chunk.profileThawEnd()
			}
			normal = true
			c.finish()
			return
		}
		if c.target == c {
			break
		}
		c.suspendParent()
		g = rt.CurG() // the parent may have been resumed on another goroutine
		slot = gls.SlotG(unsafe.Pointer(g))
		prev = slot.Push(&c.local)
		if c.counted { // as at the first pass
			if cc, l := (*countedCont)(unsafe.Pointer(c)), proflabel.Get(); l != cc.outer || l != cc.labels {
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
		if r.abandoned {
			// A deferred call of the unwinding body yielded: nobody
			// resumes c.
			c.finish()
			return
		}
	}
	if !c.armed && c.frozenDefers() {
		c.arm()
	}
	c.owner = nil
	c.state.Store(int32(stSuspended))
}

// suspendParent handles a yield of c that named an enclosing scope. c's
// frames are in its chunk, and this goroutine is back in the parent's
// body. The parent must be suspended too, from here, with c inside it.
// suspendParent returns when the parent is resumed, perhaps on another
// goroutine, and c is to be thawed again.
func (c *Cont) suspendParent() {
	s := &c.stack
	p := c.parentC
	p.child = c
	cancelled, pe := p.freezeNested(c.target)
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

// unmount undoes mount's binding, the body's profiler labels included
// (mountLabels), and counts what arch.Thaw thawed (an uncounted record
// only zeroes those counts). mount has it written out.
func (c *Cont) unmount(slot gls.Slot, prev *gls.Local) {
	if c.counted {
		c.unmountCounted()
	}
	k := &c.stack.chunk
	k.Thawed, k.unwound = 0, 0
	slot.Pop(prev)
}

// unmountCounted is unmount's part for a counted record: the labels,
// and the counts of what arch.Thaw thawed and of the unwinds.
//
//go:noinline
func (c *Cont) unmountCounted() {
	// unmountLabels's fast path, written out: the goroutine's labels
	// are still the body's, which are the goroutine's own.
	cc := (*countedCont)(unsafe.Pointer(c))
	if now := proflabel.Get(); now != cc.outer || now != cc.labels {
		c.unmountLabels(now)
	}
	k, n := &c.stack.chunk, &cc.n
	if t := k.Thawed; t != 0 {
		bump(&n.framesThawed, uint64(t>>32))
		bump(&n.bytesThawed, uint64(uint32(t))*uint64(wordSize))
	}
	if u := k.unwound; u != 0 {
		bump(&n.unwinds, uint64(u))
	}
}

// run runs or resumes s until it yields or its body returns. It is one
// pass of mount's loop, for the tests and the start-up probe, which drive
// an stackState without a Cont. Must match the pass in mount
// (TestMountPassMatchesRun).
//
//go:noinline
func (s *stackState) run() {
	s.yielded = false
	if !s.started {
		s.started = true
		arch.Enter(&s.chunk.Link, s.body)
	} else {
		s.prepareThaw()
		arch.Enter(&s.chunk.Link, host)
		if s.rethrow {
			s.rethrowLoop()
		}
	}
	if !s.yielded {
		s.done = true
	}
}

// prepareThaw readies c to be thawed by arch.Enter(&c.chunk.Link, host).
func (c *stackState) prepareThaw() {
	if freezeProf.rate.Load() != 0 {
		c.chunk.profileThaw()
	}
	// Room for the first record, so that Thaw rarely has to grow the
	// stack itself: a comparison when there is.
	if top := c.chunk.MemTop; top > 0 {
		// The image words of the last record, read without memory()'s
		// slice: MemTop is within the array.
		n := arch.HeaderEnding(unsafe.Add(c.chunk.Mem, top*wordSize)).Words
		// ensureStack, written out: one call when there is room.
		if need := uintptr(n)*wordSize + 8<<10; arch.StackRoom() <= need+arch.ThawHeadroom {
			arch.GrowStack(need)
		}
	}
	if c.elided {
		// The innermost frame continues where its Yield call returns.
		// Usually Yield's results, (target, nil), are in the result
		// registers (thawHost). The freeze of an enclosing continuation
		// may have failed (rare holds why), or c was abandoned. Then the
		// frame continues as if it had called yieldReturn there
		// (arch.Thaw's rethrow), which tells.
		c.elided = false
		c.mode = thawYield
		if c.rare != nil || c.cancel {
			c.mode = rethrowYieldReturn
		}
		return
	}
	c.mode = thawResume
	c.resumed = true
}

// thawHost is the host frame of every resume: what arch.Enter calls, the
// one frame between Enter and the return barrier. l is the Link of the
// stackState to thaw. It runs arch.Thaw as the state's mode says, which
// thaws the chunk's records as the frames above it return, and returns
// when the body's outermost frame returns into the barrier. A panic that
// crosses the barrier while frozen frames have deferred calls pending is
// recovered by crossing, and the host returns with rethrow set; a
// runtime.Goexit crossing it never returns.
func thawHost(l *arch.Link) {
	c := linkState(l)
	finished := false
	defer c.crossing(&finished)
	var ret unsafe.Pointer // a nil error, as a capture returns
	if c.mode == thawYield {
		// Yield's first result, the continuation it suspended: c is a
		// Cont's (only Yield elides its frame), whose target it is.
		// Thaw's arguments keep it visible to the collector.
		ret = unsafe.Pointer((*Cont)(unsafe.Add(unsafe.Pointer(c), -contStack)).target)
	}
	arch.Thaw(&c.chunk.Link, rethrowPCs[c.mode], ret)
	finished = true
}

// host is thawHost as arch.Enter's fn, which Enter calls with the Link in
// the first argument register: a static function value, so a resume makes
// no closure.
var host = func() func() {
	f := thawHost
	return *(*func())(unsafe.Pointer(&f))
}()

// linkState returns the stackState whose chunk's Link is at l. A record
// is always on the heap, so l stays valid when the stack moves.
func linkState(l *arch.Link) *stackState { return (*stackState)(unsafe.Pointer(l)) }

// linkState needs the Link at offset 0 of a stackState: this fails to
// compile otherwise.
var _ [0]struct{} = [unsafe.Offsetof(stackState{}.chunk) + unsafe.Offsetof(stackChunk{}.Link)]struct{}{}

// contStack is the offset of a Cont's stack-copying state: the Cont whose
// stackState is at s is at s less contStack.
const contStack = int(unsafe.Offsetof(Cont{}.stack))
