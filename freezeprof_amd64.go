//go:build amd64 && !race && !msan && !asan

package weft

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// This file is the stack-copying backend's side of the freeze/thaw
// profile (freezeprof.go). Each hook's call site tests freezeProf.rate
// first. prepareThaw calls profileThaw before a resume; the run it
// starts ends in a capture (profileFreeze) or in the body's end
// (profileThawEnd), which record the thaw, so that a round trip tests the
// rate twice and keeps nothing of its own for the profile.

// profileFreeze records, if sampled, a capture into c that froze frames
// frames and bytes bytes of stack, by the fast path if templated. The
// record's stack is c's frozen frames, the newly captured ones on top. It
// first records the sampled thaw whose run the capture ends, if any.
//
//go:noinline
func (c *stackChunk) profileFreeze(frames int, bytes uintptr, templated bool) {
	if pendingThaws.n.Load() != 0 {
		if t := takePendingThaw(c); t != nil {
			t.done(uint64(c.Thawed))
		}
	}
	w := freezeSampled()
	if w == 0 {
		return
	}
	f := FreezeRecord{Captures: 1, FramesFrozen: uint64(frames), BytesFrozen: uint64(bytes)}
	if templated {
		f.Templated = 1
	}
	addFreeze(c.framePCs(), w, f)
}

// framePCs returns the return PCs of c's frozen frames, innermost first:
// one per physical frame, which logicalPCs expands when the profile is
// read.
func (c *stackChunk) framePCs() []uintptr {
	fs := c.frames()
	pcs := make([]uintptr, len(fs))
	for i, f := range fs {
		pcs[i] = f.pc
	}
	return pcs
}

// logicalPCs returns a record's stack in the form runtime.Callers gives
// it: one PC per logical frame, inlined calls included. The stack-copying
// backend records physical frames (framePCs), the portable one
// runtime.Callers's already.
func logicalPCs(pcs []uintptr) []uintptr {
	if !useStackCopy {
		return append([]uintptr(nil), pcs...)
	}
	out := make([]uintptr, 0, len(pcs))
	for _, pc := range pcs {
		out = descFor(pc).fn.LogicalPCs(pc, out)
	}
	return out
}

// thawSampled is a sampled thaw, from the resume that starts it to the
// end of the run it starts.
type thawSampled struct {
	weight uint64
	// stack is the chunk's frozen frames before the thaw: where the body
	// resumes.
	stack []uintptr
	// recFrames are the frames of each record before the thaw, innermost
	// (the first thawed) first.
	recFrames []uint32
	// all is what thawing every record adds to Link.Thawed:
	// frames<<32 | image words.
	all uint64
}

// pendingThaws are the sampled thaws whose runs have not ended, by the
// address of their chunk. An address, not a pointer: an entry must not
// keep a chunk alive. A run that ends in a panic or runtime.Goexit drops
// its entry (Cont.aborted) and is not recorded.
var pendingThaws struct {
	n  atomic.Int32 // len(m), read without mu
	mu sync.Mutex
	m  map[uintptr]*thawSampled
}

// takePendingThaw removes and returns c's pending sampled thaw, or nil.
func takePendingThaw(c *stackChunk) *thawSampled {
	pendingThaws.mu.Lock()
	defer pendingThaws.mu.Unlock()
	k := uintptr(unsafe.Pointer(c))
	t := pendingThaws.m[k]
	if t != nil {
		delete(pendingThaws.m, k)
		pendingThaws.n.Store(int32(len(pendingThaws.m)))
	}
	return t
}

// profileThaw samples the thaw that c's next run starts, and if sampled
// keeps it until the run ends.
//
//go:noinline
func (c *stackChunk) profileThaw() {
	w := freezeSampled()
	if w == 0 {
		return
	}
	t := &thawSampled{weight: w, stack: c.framePCs()}
	for _, r := range c.records() {
		t.recFrames = append(t.recFrames, r.Frames)
		t.all += uint64(r.Frames)<<32 | uint64(r.Words)
	}
	pendingThaws.mu.Lock()
	defer pendingThaws.mu.Unlock()
	if pendingThaws.m == nil {
		pendingThaws.m = make(map[uintptr]*thawSampled)
	}
	pendingThaws.m[uintptr(unsafe.Pointer(c))] = t
	pendingThaws.n.Store(int32(len(pendingThaws.m)))
}

// profileThawEnd records c's pending sampled thaw, if any, at the end of
// its body: the body returned through every frame, so the run thawed
// every record.
//
//go:noinline
func (c *stackChunk) profileThawEnd() {
	if pendingThaws.n.Load() == 0 {
		return
	}
	if t := takePendingThaw(c); t != nil {
		t.done(t.all)
	}
}

// done records the sampled thaw t, whose run thawed what thawed says, in
// Link.Thawed's form. A run thaws whole records, innermost first, so the
// frames it thawed are those of its first k records: the first is thawed
// on resuming, each of the others on a barrier crossing.
func (t *thawSampled) done(thawed uint64) {
	frames := uint32(thawed >> 32)
	f := FreezeRecord{
		Thaws:        1,
		FramesThawed: uint64(frames),
		BytesThawed:  uint64(uint32(thawed)) * uint64(wordSize),
	}
	k, sum := 0, uint32(0)
	for k < len(t.recFrames) && sum < frames {
		sum += t.recFrames[k]
		k++
	}
	if k > 1 {
		f.Crossings = uint64(k - 1)
	}
	addFreeze(t.stack, t.weight, f)
}
