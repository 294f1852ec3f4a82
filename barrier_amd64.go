//go:build amd64 && !race && !msan && !asan

package weft

import (
	"reflect"
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// This file drives the destructive half of the stack-copying backend, whose
// assembly is in package arch: arch.Enter is the entry trampoline a
// continuation's frames (or, on a resume, its host frames) return into,
// arch.JumpBack discards a captured region and returns to it, and
// arch.Thaw is the return barrier, which copies the chunk's records back
// one at a time as the frames above it return. scCont drives them;
// engine_stackcopy_amd64.go drives scCont from Run and Yield.

// scCont is the stack-copying state of a continuation: its chunk and the
// flags that tell a thawed yield how to return. Cont embeds one; the
// mechanism tests drive it alone.
type scCont struct {
	chunk stackChunk
	body  func()
	host  func() // makeHost's, made on the first resume

	// rare is what only a refused yield or a panic at the barrier needs,
	// made the first time: most continuations never need it, and every
	// parked virtual thread has a continuation.
	rare *scRare

	mode    uint8 // how the host thaws: thawResume, or a rethrow* index
	rethrow bool  // the host returned to raise thrown again
	started bool
	yielded bool // the last arch.Enter returned because of a yield
	resumed bool // set before a thaw; scYield returns when it sees it
	// elided: the last capture left out weft.Yield's frame (leave), and
	// the resume calls yieldReturn where Yield returns, instead of
	// setting resumed.
	elided bool
	done   bool
	cancel bool
}

// maxKeptArrays bounds the bytes of stack-chunk arrays that a finished
// record keeps for a Reset: a record that froze a deep stack once gives
// its arrays back, rather than holding them for bodies that may never
// need them.
const maxKeptArrays = 2 << 10

// finished drops what the record of a finished continuation no longer
// needs: everything, or with keep everything but the chunk's arrays (if
// at most maxKeptArrays bytes), emptied of every pointer they held, the
// host closure and the body, for a Reset (which leaves them in place, and
// the body too if it is the same: an executor resets its records to its
// one body, and the pointer is then not stored twice per reuse, once nil
// and once again, each store with its write barrier while the collector
// marks).
func (c *scCont) finished(keep bool) {
	k := &c.chunk
	if !keep || (uintptr(k.memLen)+uintptr(k.ptrsLen))*wordSize > maxKeptArrays {
		*c = scCont{}
		return
	}
	// Frames still frozen when the body ended (a panic that left them
	// with nothing deferred) and records thawed since the last capture
	// both leave pointers there.
	clear(k.pointers()[:max(uint32(k.PtrTop), k.ptrHigh)])
	// The rest field by field, and a pointer only if set: while the
	// collector marks, a struct assignment runs its bulk write barrier
	// over every pointer slot of the struct, set or not, and a virtual
	// thread's record ends once per virtual thread (skynet, on 16 CPUs:
	// 3% of its CPU time in this function's barrier).
	// TestFinishedKeepsOnlyArrays fails if a field is added and not
	// cleared here.
	k.TopOff, k.MemTop, k.PtrTop, k.Thawed = 0, 0, 0, 0
	k.ptrHigh, k.unwound = 0, 0
	if k.tmpl != nil {
		k.tmpl = nil
	}
	if c.rare != nil {
		c.rare = nil
	}
	c.mode, c.rethrow, c.started, c.yielded = 0, false, false, false
	c.resumed, c.elided, c.done, c.cancel = false, false, false, false
}

// scRare is the part of a scCont that only a refused yield or a panic at
// the return barrier needs.
type scRare struct {
	err error // why the last yield could not suspend (scYield)

	// What the yield returns when it is thawed next: the freeze of an
	// enclosing continuation failed (pinErr), or the continuation was
	// abandoned and must unwind (scCont.cancel).
	pinErr *errPinned

	// thrown is a panic that crossed the return barrier while frozen
	// frames still had deferred calls pending: frozenPanic raises it again
	// in the innermost of them.
	thrown any

	// crossed is the value of the panic that last reached the barrier as
	// raised (not raised again by frozenPanic), and crossedStack the
	// goroutine's stack at that moment, with the frames it had unwound
	// (Cont.PanicStack). A panic raised again keeps them as they are, and
	// a continuation that ends by a panic hands them to its parent, whose
	// barrier the panic may cross next; a yield drops them.
	crossed      any
	crossedStack []byte
}

// dropCrossed forgets the panic recorded at the barrier (scRare.crossed).
func (r *scRare) dropCrossed() {
	if r.crossedStack != nil {
		r.crossed, r.crossedStack = nil, nil
	}
}

// rareState returns c.rare, made if need be.
func (c *scCont) rareState() *scRare {
	if c.rare == nil {
		c.rare = new(scRare)
	}
	return c.rare
}

// refusal returns why the last scYield did not suspend, or nil.
func (c *scCont) refusal() error {
	if c.rare == nil {
		return nil
	}
	return c.rare.err
}

// run runs or resumes c until it yields or its body returns.
//
//go:noinline
func (c *scCont) run() {
	c.yielded = false
	if !c.started {
		c.started = true
		arch.Enter(&c.chunk.Link, c.body)
	} else {
		c.prepareThaw()
		arch.Enter(&c.chunk.Link, c.host)
		c.rethrowLoop()
	}
	if !c.yielded {
		c.done = true
	}
}

// prepareThaw readies c to be thawed by arch.Enter(&c.chunk.Link, c.host).
func (c *scCont) prepareThaw() {
	if c.host == nil {
		c.host = c.makeHost()
	}
	// Room for the first record, so that Thaw rarely has to grow the
	// stack itself: a comparison when there is.
	if top := c.chunk.MemTop; top > 0 {
		// The image words of the last record, read without memory()'s
		// slice: MemTop is within the array.
		n := arch.HeaderEnding(unsafe.Add(c.chunk.Mem, top*wordSize)).Words
		// ensureStack, written out: one call when there is room.
		if need := uintptr(n)*wordSize + 8<<10; arch.StackRoom() <= need+arch.ThawHeadroom {
			growStackFor(need)
		}
	}
	if c.elided {
		// The innermost frame continues where its Yield call returns,
		// with Yield's usual results, (target, nil), in the result
		// registers (makeHost); or, if the freeze of an enclosing
		// continuation may have failed (rare holds why) or this one was
		// abandoned, as if it had called yieldReturn there (arch.Thaw's
		// rethrow), which tells.
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

// rethrowLoop follows arch.Enter(&c.chunk.Link, c.host): while the host
// returned because a panic crossed the barrier and was recovered there
// (crossing), it raises the panic again in the innermost frozen frame with
// a deferred call pending, as if the frames between had unwound (they have
// none), by entering the host again with frozenPanic as the rethrow.
func (c *scCont) rethrowLoop() {
	for c.rethrow {
		c.rethrow = false
		c.chunk.dropToDefers()
		c.mode = rethrowPanic
		arch.Enter(&c.chunk.Link, c.host)
	}
}

// makeHost returns what arch.Enter calls on a resume: the one frame
// between Enter and the return barrier. It runs arch.Thaw as c.mode says,
// which thaws the chunk's records as the frames above it return, and returns
// when the body's outermost frame returns into the barrier. A panic that
// crosses the barrier while frozen frames have deferred calls pending is
// recovered by crossing, and the host returns with c.rethrow set; a
// runtime.Goexit crossing it never returns. It is a closure, not a method
// value, so that it is one frame, not two.
func (c *scCont) makeHost() func() {
	return func() {
		finished := false
		defer c.crossing(&finished)
		var ret unsafe.Pointer // a nil error, as a capture returns
		if c.mode == thawYield {
			// Yield's first result, the continuation it suspended: c is
			// a Cont's (only Yield elides its frame), whose target it
			// is. Thaw's arguments keep it visible to the collector.
			ret = unsafe.Pointer((*Cont)(unsafe.Add(unsafe.Pointer(c), -contSC)).target)
		}
		arch.Thaw(&c.chunk.Link, rethrowPCs[c.mode], ret)
		finished = true
	}
}

// contSC is the offset of a Cont's stack-copying state: the Cont whose
// scCont is at s is at s less contSC.
const contSC = int(unsafe.Offsetof(Cont{}.sc))

// crossing runs when the host frame unwinds. A panic or runtime.Goexit
// that reaches the barrier must still run the deferred calls of the frames
// that are still frozen, innermost first, and recover must work in them as
// in plain Go. Frozen frames with nothing pending need nothing: they are
// dropped with the continuation, and the panic goes on untouched, with its
// original stack for the crash report. Otherwise a panic is recovered here
// and raised again from the innermost frame that has deferred calls
// (rethrowLoop); Goexit cannot be recovered, so the frames are thawed above
// this deferred call instead, and Goexit is called again from there, which
// runs their deferred calls, then this frame's callers', and ends the
// goroutine.
func (c *scCont) crossing(finished *bool) {
	if *finished || !c.chunk.deferPending() {
		return
	}
	c.chunk.unwound++
	if r := recover(); r != nil {
		rr := c.rareState()
		rr.thrown = r
		// The frames the panic unwound are still on the stack here, under
		// this deferred call; they are not once frozenPanic raises it
		// again. A panic frozenPanic raised has none of its own: the
		// stack where it was first raised is kept (or was handed over by
		// a nested continuation it ended).
		if !reraised() || rr.crossedStack == nil || !sameInterface(rr.crossed, r) {
			rr.crossed, rr.crossedStack = r, debug.Stack()
		}
		if goexitAbove(unsafe.Pointer(finished)) {
			// The panic was raised by a deferred call of a
			// runtime.Goexit that began above the barrier. Once this
			// deferred call returns, the runtime goes on with that
			// Goexit, not with the host's caller, so rethrowLoop
			// would never run. Raise the panic again from here instead,
			// as a deferred call of a Goexit of the thawed frames'
			// own (frozenGoexitPanic): a frame that recovers it then
			// goes on exiting, as in plain Go, and never returns.
			c.chunk.dropToDefers()
			c.mode = rethrowGoexitPanic
			c.host()
			return
		}
		c.rethrow = true
		return
	}
	// runtime.Goexit (recover reports no panic, and stops none: with
	// GODEBUG=panicnil=1 a panic(nil) is taken for a Goexit).
	c.chunk.dropToDefers()
	c.mode = rethrowGoexit
	c.host()
}

// goexitEntry is runtime.Goexit's entry PC.
var goexitEntry = reflect.ValueOf(runtime.Goexit).Pointer()

// goexitAbove reports whether a runtime.Goexit runs in the frames between
// its caller, a deferred call of the host frame (crossing), and that host
// frame, the one that holds inHost: whether the panic crossing recovers was
// raised during a Goexit that began above the barrier. The runtime resumes
// such a Goexit when the recovering deferred call returns (recovery never
// jumps past a pending Goexit; a Goexit frame on the stack is one still
// running). The host frame is told by its address, not its code: every
// continuation's host runs the same closure, and a nested continuation's
// may lie between. The walk is of physical frames, with the runtime's
// metadata, as a capture's. Only the rare path of a panic that crosses the
// barrier with deferred calls pending calls it.
//
//go:noinline
func goexitAbove(inHost unsafe.Pointer) bool {
	if g := rt.CurG(); uintptr(inHost) < g.StackLo || uintptr(inHost) >= g.StackHi {
		// Not in a frame (a compiler that moved the flag to the heap):
		// leave the panic to rethrowLoop, as before this check existed,
		// rather than walk past the host.
		return false
	}
	pc, sp := arch.CallerPCSP()
	for fr := rt.FrameAt(pc, sp); fr.Fn.Valid(); fr = fr.Caller() {
		if uintptr(fr.SP) <= uintptr(inHost) && uintptr(inHost) < uintptr(fr.FP) {
			return false // the host frame
		}
		if fr.Fn.Entry() == goexitEntry {
			return true
		}
	}
	return false
}

// scPanicStack is PanicStack on this backend: the panic recorded at c's
// barrier, asked from c's body, or, once a panic raised again at the
// barrier has ended c's body, the one handCrossed kept for Run's caller.
func (c *Cont) scPanicStack(v any) []byte {
	if r := c.sc.rare; r != nil && r.crossedStack != nil && sameInterface(r.crossed, v) {
		if !reraised() {
			return nil
		}
		return r.crossedStack
	}
	if p := c.pt; p != nil && p.panicStack != nil && sameInterface(p.panicked, v) && reraised() {
		return p.panicStack
	}
	return nil
}

// frozenPanicEntry is frozenPanic's entry PC.
var frozenPanicEntry = reflect.ValueOf(frozenPanic).Pointer()

// reraised reports whether the panic whose deferred calls are running on
// the calling goroutine was raised by frozenPanic: whether, on the
// calling goroutine's stack, the frame under the runtime's panic is
// frozenPanic's. Only the panic path calls it.
func reraised() bool {
	raiser, _, ok := panicRaiser()
	return ok && raiser.Entry == frozenPanicEntry
}

// frozenPanic raises the panic in scCont.thrown again. arch.Thaw enters it
// as if the innermost thawed frame had called it where that frame
// continues.
func frozenPanic() {
	l := gls.Current()
	c := contOf(l)
	v := c.sc.rare.thrown
	c.sc.rare.thrown = nil
	panic(v)
}

// frozenGoexit continues a runtime.Goexit in thawed frames, as frozenPanic
// continues a panic.
func frozenGoexit() {
	runtime.Goexit()
}

// frozenGoexitPanic raises the panic in scCont.thrown again in thawed
// frames from a deferred call of a runtime.Goexit (crossing, when the panic
// was raised during a Goexit): if a frame recovers it, the Goexit goes on.
// The deferred call is frozenPanic itself, so that reraised knows the panic.
func frozenGoexitPanic() {
	defer frozenPanic()
	runtime.Goexit()
}

// yieldReturn ends, on the resume, a weft.Yield whose frame the capture
// left out (scCont.leave), when the freeze of an enclosing continuation
// failed or the continuation was abandoned: arch.Thaw calls it as if the
// frame that called Yield had called it where Yield returns, so its
// results are Yield's. It does what Yield would have done after its
// capture "returned": report the failed freeze, or unwind. (Otherwise
// Thaw continues that frame with Yield's usual results in the result
// registers: thawYield.)
func yieldReturn() (*Cont, *pinning.Error) {
	c := contOf(gls.Current())
	s, t := &c.sc, c.target
	if s.rare != nil && s.rare.pinErr != nil {
		return t, t.pinnedFrom(s.takePinErr())
	}
	if s.cancel {
		runtime.Goexit()
	}
	return t, nil
}

// scYieldCounts, if set (by tests, whose scYield records belong to no
// Cont), is where scYield's captures count what they froze.
var scYieldCounts *counters

// How the host thaws the next record (scCont.mode): thawResume continues
// its innermost frame as if its call (to capture) had returned nil;
// thawYield as if its call to Yield, which the capture left out, had
// returned the continuation it suspended and nil; the others call a
// function from it, as if that frame had called it, whose entry is in
// rethrowPCs (arch.Thaw's rethrow).
const (
	thawResume uint8 = iota
	thawYield
	rethrowYieldReturn
	rethrowPanic
	rethrowGoexit
	rethrowGoexitPanic
)

var rethrowPCs = [...]uintptr{
	thawResume:         0,
	thawYield:          0,
	rethrowYieldReturn: reflect.ValueOf(yieldReturn).Pointer(),
	rethrowPanic:       reflect.ValueOf(frozenPanic).Pointer(),
	rethrowGoexit:      reflect.ValueOf(frozenGoexit).Pointer(),
	rethrowGoexitPanic: reflect.ValueOf(frozenGoexitPanic).Pointer(),
}

// scYield suspends the running scCont: it captures the frames from its own
// up to arch.Enter's and jumps back. When the continuation is thawed, the
// capture call "returns" again, with c.resumed set, and scYield returns.
// It returns false, suspending nothing, if the region cannot be captured.
//
//go:noinline
func scYield(c *scCont) bool {
	err := c.chunk.capture(scEntry, false, scYieldCounts)
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

// settle finishes a capture that its caller made of its own frame (the
// capture call is settle's argument). Right after the capture it jumps
// back, the region being frozen, or reports why nothing was suspended.
// When the region is thawed and the capture call "returns" again, it
// reports why the continuation was resumed: cancelled if it was abandoned
// and must unwind, pe if the freeze of an enclosing continuation failed.
func (s *scCont) settle(err error) (cancelled bool, pe *errPinned) {
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

// leave finishes a capture that weft.Yield made from its caller's frame
// (the capture call is leave's argument): it jumps back, the region being
// frozen, or reports why nothing was suspended. The capture call never
// "returns" again: the resume continues the caller of Yield through
// yieldReturn.
func (s *scCont) leave(err error) *errPinned {
	if err != nil {
		return refused(err)
	}
	s.yielded, s.elided = true, true
	arch.JumpBack(s.chunk.TopOff)
	panic("unreachable: arch.JumpBack returned")
}

// growStackFor grows the goroutine's stack to at least n bytes below the
// caller's frame, the ordinary way, by calling down.
//
//go:noinline
func growStackFor(n uintptr) byte {
	var pad [1024]byte
	if n <= uintptr(len(pad)) {
		return pad[0]
	}
	return growStackFor(n-uintptr(len(pad))) + pad[n%uintptr(len(pad))]
}
