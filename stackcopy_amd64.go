//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/internal/rt"
)

// This file is the destructive half of the stack-copying backend: scEnter
// is the entry trampoline a continuation's frames return into, scJumpBack
// discards a captured region and returns to it, and scEnter's thaw path
// copies a chunk back below its own frame and jumps into it. scCont drives
// them; engine_stackcopy.go drives scCont from Run and Yield.

// thawPlan is what scEnter's thaw path reads: the chunk's arrays and where
// the innermost frame continues. It lives in the frame of scCont.run,
// which calls scEnter.
type thawPlan struct {
	words   unsafe.Pointer // the image, &chunk.mem[0]
	n       uintptr        // number of words
	ptrs    unsafe.Pointer // &chunk.ptrs[0], or nil
	ptrAt   unsafe.Pointer // the chunk's ptrAt table in mem, or nil
	np      uintptr
	refs    unsafe.Pointer // the chunk's refs table in mem, or nil
	nr      uintptr
	outerBP uintptr // word index of the outermost saved BP, or ^0
	bp0     uintptr // byte offset of the innermost frame's saved-BP slot
	pc0     uintptr // where the innermost frame continues
	// short is set by scEnter when the goroutine's stack has too little
	// room below scEnter's frame: it then returns without thawing.
	short uintptr
}

// thawHeadroom is the stack the thaw leaves free below the thawed frames,
// more than a NOSPLIT chain may use (the runtime's StackGuard).
const thawHeadroom = 2048

// scEnter calls fn, the body, in a frame the body's frames return into; or,
// if thaw, copies plan's chunk below that frame and jumps into it, so that
// the thawed frames return into it instead. Implemented in
// stackcopy_amd64.s.
//
//go:noescape
func scEnter(c *scCont, fn func(), thaw bool, plan *thawPlan)

// scJumpBack discards every frame below scEnter's (whose SP is topOff below
// the goroutine's stack top) and returns from scEnter's call of the body.
//
//go:noescape
func scJumpBack(topOff uintptr)

// scJump is the end of scEnter's thaw path; never called from Go.
func scJump()

// scEnterPC returns the entry PC of scEnter, the boundary of every region.
func scEnterPC() uintptr

// scCont is the stack-copying state of a continuation: its chunk, the
// plan its next thaw reads, and the flags that tell a thawed yield how to
// return. Cont embeds one; the mechanism tests drive it alone.
type scCont struct {
	chunk   stackChunk
	body    func()
	started bool
	yielded bool // the last scEnter returned because of a yield
	resumed bool // set before a thaw; scYield returns when it sees it
	done    bool
	err     error // why the last yield could not suspend

	// What the yield returns when it is thawed next: the freeze of an
	// enclosing continuation failed (pinErr), or the continuation was
	// abandoned and must unwind (cancel).
	pinErr *errPinned
	cancel bool
}

// run runs or resumes c until it yields or its body returns.
//
//go:noinline
func (c *scCont) run() {
	c.yielded = false
	if !c.started {
		c.started = true
		scEnter(c, c.body, false, nil)
	} else {
		// Grow the stack, then thaw. scEnter checks the room itself, after
		// its last safe point: between here and there the runtime may shrink
		// the stack (a shrink the GC asked for happens at the next function
		// prologue), so growing first proves nothing on its own.
		var plan thawPlan
		c.chunk.plan(&plan)
		need := plan.n*wordSize + 8<<10
		for {
			ensureStack(need)
			c.resumed = true
			plan.short = 0
			scEnter(c, nil, true, &plan)
			if plan.short == 0 {
				break
			}
			c.resumed = false
			need *= 2
		}
	}
	if !c.yielded {
		c.done = true
	}
}

// plan fills in what scEnter needs to thaw k.
func (k *stackChunk) plan(p *thawPlan) {
	*p = thawPlan{
		words:   unsafe.Pointer(unsafe.SliceData(k.mem)),
		n:       uintptr(k.n),
		np:      uintptr(k.np),
		nr:      uintptr(k.nr),
		outerBP: ^uintptr(0),
		bp0:     uintptr(k.bp0),
		pc0:     k.pc0,
	}
	if k.np > 0 {
		p.ptrs = unsafe.Pointer(unsafe.SliceData(k.ptrs))
		p.ptrAt = unsafe.Pointer(unsafe.SliceData(k.ptrAt()))
	}
	if k.nr > 0 {
		p.refs = unsafe.Pointer(unsafe.SliceData(k.refs()))
	}
	if k.outerBP >= 0 {
		p.outerBP = uintptr(k.outerBP)
	}
}

// scYield suspends the running scCont: it captures the frames from its own
// up to scEnter's and jumps back. When the continuation is thawed, the
// capture call "returns" again, with c.resumed set, and scYield returns.
// It returns false, suspending nothing, if the region cannot be captured.
//
//go:noinline
func scYield(c *scCont) bool {
	err := c.chunk.capture(scEnterPC())
	if c.resumed {
		c.resumed = false
		return true
	}
	if err != nil {
		c.err = err
		return false
	}
	c.yielded = true
	scJumpBack(c.chunk.topOff)
	panic("unreachable: scJumpBack returned")
}

// ensureStack makes sure the goroutine has n bytes of stack below the
// caller's frame: a comparison when it has, an ordinary growth (calling
// down) when it has not.
//
//go:nosplit
func ensureStack(n uintptr) {
	var here byte
	g := rt.CurG()
	if sp := uintptr(unsafe.Pointer(&here)); sp > g.StackLo && sp-g.StackLo > n+thawHeadroom {
		return
	}
	growStackFor(n)
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
