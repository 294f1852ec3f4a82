//go:build amd64 && !race && !msan && !asan

package weft

import (
	"sync/atomic"
	"unsafe"
)

// This file is a continuation's stack-copying state (stackState) and its
// counters.

// stackState is the stack-copying state of a continuation: its chunk and the
// flags that tell a thawed yield how to return. Cont embeds one; the
// mechanism tests drive it alone.
type stackState struct {
	chunk stackChunk
	body  func()

	// rare is what only a refused yield or a panic at the barrier needs,
	// made the first time: most continuations never need it, and every
	// parked virtual thread has a continuation.
	rare *stackRare

	mode    uint8 // how the host thaws: thawResume, or a rethrow* index
	rethrow bool  // the host returned to raise thrown again
	started bool
	yielded bool // the last arch.Enter returned because of a yield
	resumed bool // set before a thaw; stackYield returns when it sees it
	// elided: the last capture left out weft.Yield's frame (leave), and
	// the resume calls yieldReturn where Yield returns, instead of
	// setting resumed.
	elided bool
	done   bool
	cancel bool
}

// maxKeptArrays bounds the bytes of stack-chunk arrays that a finished
// record keeps for a Reset. A record that froze a deep stack once gives
// its arrays back, rather than hold them for bodies that may never need
// them.
const maxKeptArrays = 2 << 10

// finished drops what the record of a finished continuation no longer
// needs. Without keep, it drops everything. With keep, it keeps for a
// Reset the chunk's arrays (up to maxKeptArrays bytes), emptied of every
// pointer, and the body. Reset leaves the arrays in place, and the body
// too if it is the same. An executor resets its records to its one body,
// so the pointer is not stored twice per reuse, each store with a write
// barrier while the collector marks.
func (c *stackState) finished(keep bool) {
	k := &c.chunk
	if !keep || (uintptr(k.memLen)+uintptr(k.ptrsLen))*wordSize > maxKeptArrays {
		*c = stackState{}
		return
	}
	// Frames still frozen when the body ended (a panic that left them
	// with nothing deferred) and records thawed since the last capture
	// both leave pointers there.
	clear(k.pointers()[:max(uint32(k.PtrTop), k.ptrHigh)])
	// The rest field by field, each pointer only if set. While the
	// collector marks, a struct assignment runs its bulk write barrier
	// over every pointer slot of the struct, set or not. A virtual
	// thread's record ends once per virtual thread.
	// TestFinishedKeepsOnlyArrays fails if a field is added and not
	// cleared here.
	k.TopOff, k.MemTop, k.PtrTop, k.Thawed = 0, 0, 0, 0
	k.ptrHigh, k.unwound, k.deferred = 0, 0, false
	if k.tmpl != nil {
		k.tmpl = nil
	}
	if c.rare != nil {
		c.rare = nil
	}
	c.mode, c.rethrow, c.started, c.yielded = 0, false, false, false
	c.resumed, c.elided, c.done, c.cancel = false, false, false, false
}

// stackRare is the part of a stackState that only a refused yield or a
// panic at the return barrier needs.
type stackRare struct {
	err error // why the last yield could not suspend (stackYield)

	// abandoned marks a continuation that Abandon is unwinding: mount
	// counts no Run for it, and finishes it however its body ends.
	abandoned bool

	// What the yield returns when it is thawed next: the freeze of an
	// enclosing continuation failed (pinErr), or the continuation was
	// abandoned and must unwind (stackState.cancel).
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

// dropCrossed forgets the panic recorded at the barrier (stackRare.crossed).
func (r *stackRare) dropCrossed() {
	if r.crossedStack != nil {
		r.crossed, r.crossedStack = nil, nil
	}
}

// rareState returns c.rare, made if need be.
func (c *stackState) rareState() *stackRare {
	if c.rare == nil {
		c.rare = new(stackRare)
	}
	return c.rare
}

// refusal returns why the last stackYield did not suspend, or nil.
func (c *stackState) refusal() error {
	if c.rare == nil {
		return nil
	}
	return c.rare.err
}

// bump adds n to a counter of a continuation that the calling goroutine
// has mounted. That goroutine is the counter's only writer, so a plain
// load and store suffice. Stats reads the counters with atomic loads,
// which on amd64 see either the old or the new value of an aligned word.
func bump(p *atomic.Uint64, n uint64) {
	w := (*uint64)(unsafe.Pointer(p))
	*w += n
}

// froze counts, if n is not nil, a capture of frames frames and bytes
// bytes of stack; templated says it took the fast path.
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
