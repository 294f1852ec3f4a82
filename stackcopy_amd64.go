//go:build amd64 && !race && !msan && !asan

package weft

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
)

// This file drives the destructive half of the stack-copying backend, whose
// assembly is in package arch: arch.Enter is the entry trampoline a
// continuation's frames return into, arch.JumpBack discards a captured
// region and returns to it, and arch.Enter's thaw path copies a chunk back
// below its own frame and jumps into it. scCont drives them;
// engine_stackcopy_amd64.go drives scCont from Run and Yield.

// scCont is the stack-copying state of a continuation: its chunk, the
// plan its next thaw reads, and the flags that tell a thawed yield how to
// return. Cont embeds one; the mechanism tests drive it alone.
type scCont struct {
	chunk   stackChunk
	body    func()
	started bool
	yielded bool // the last arch.Enter returned because of a yield
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
		arch.Enter(unsafe.Pointer(c), c.body, false, nil)
	} else {
		// Grow the stack, then thaw. arch.Enter checks the room itself, after
		// its last safe point: between here and there the runtime may shrink
		// the stack (a shrink the GC asked for happens at the next function
		// prologue), so growing first proves nothing on its own.
		var plan arch.ThawPlan
		c.chunk.plan(&plan)
		need := plan.N*wordSize + 8<<10
		for {
			ensureStack(need)
			c.resumed = true
			plan.Short = 0
			arch.Enter(unsafe.Pointer(c), nil, true, &plan)
			if plan.Short == 0 {
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

// plan fills in what arch.Enter needs to thaw k.
func (k *stackChunk) plan(p *arch.ThawPlan) {
	*p = arch.ThawPlan{
		Words:   unsafe.Pointer(unsafe.SliceData(k.mem)),
		N:       uintptr(k.n),
		NP:      uintptr(k.np),
		NR:      uintptr(k.nr),
		OuterBP: ^uintptr(0),
		BP0:     uintptr(k.bp0),
		PC0:     k.pc0,
	}
	if k.np > 0 {
		p.Ptrs = unsafe.Pointer(unsafe.SliceData(k.ptrs))
		p.PtrAt = unsafe.Pointer(unsafe.SliceData(k.ptrAt()))
	}
	if k.nr > 0 {
		p.Refs = unsafe.Pointer(unsafe.SliceData(k.refs()))
	}
	if k.outerBP >= 0 {
		p.OuterBP = uintptr(k.outerBP)
	}
}

// scYield suspends the running scCont: it captures the frames from its own
// up to arch.Enter's and jumps back. When the continuation is thawed, the
// capture call "returns" again, with c.resumed set, and scYield returns.
// It returns false, suspending nothing, if the region cannot be captured.
//
//go:noinline
func scYield(c *scCont) bool {
	err := c.chunk.capture(scEntry)
	if c.resumed {
		c.resumed = false
		return true
	}
	if err != nil {
		c.err = err
		return false
	}
	c.yielded = true
	arch.JumpBack(c.chunk.topOff)
	panic("unreachable: arch.JumpBack returned")
}

// ensureStack makes sure the goroutine has n bytes of stack below the
// caller's frame: a comparison when it has, an ordinary growth (calling
// down) when it has not.
//
//go:nosplit
func ensureStack(n uintptr) {
	var here byte
	g := rt.CurG()
	if sp := uintptr(unsafe.Pointer(&here)); sp > g.StackLo && sp-g.StackLo > n+arch.ThawHeadroom {
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
