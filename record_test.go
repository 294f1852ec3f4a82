//go:build amd64 && !race && !msan && !asan

package weft

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/scope"
)

// flatChunk is a chunk's records put back together as the one region they
// were captured from, innermost frame at offset 0: what the capture tests
// compare with the live stack.
type flatChunk struct {
	words   []uintptr
	ptrAt   []uint32
	ptrs    []unsafe.Pointer
	refs    []stackRef
	outerBP int32 // word index of the outermost frame's saved BP, or -1
	frames  []chunkFrame
}

// flat rebuilds c's records as one region. The saved frame pointer of each
// record's outermost frame, which thaw links to the barrier, becomes a
// reference to the next record's innermost frame.
func (c *stackChunk) flat() flatChunk {
	f := flatChunk{outerBP: -1}
	recs := c.records()
	ptop := int(c.PtrTop)
	base := uint32(0) // words
	for i, r := range recs {
		img := c.words(r)
		args := r.Args
		frameWords := r.Words - args
		if i == len(recs)-1 {
			frameWords = r.Words
		}
		if len(f.words) < int(base+r.Words) {
			f.words = append(f.words, make([]uintptr, int(base+r.Words)-len(f.words))...)
		}
		for w := range frameWords {
			f.words[base+w] = img[w]
		}
		ps := c.pointers()[ptop-int(r.Ptrs) : ptop]
		ptop -= int(r.Ptrs)
		for k, w := range c.ptrAt(r) {
			f.ptrAt = append(f.ptrAt, base+w)
			f.ptrs = append(f.ptrs, ps[k])
		}
		for _, x := range c.refs(r) {
			f.refs = append(f.refs, stackRef{at: base + x.at, target: base*uint32(wordSize) + x.target})
		}
		// The saved-BP chain, as the references it stands for, its slots
		// zero as in the region copyRegion left.
		if r.OuterBP != arch.NoBP {
			for at, steps := r.bpFirst(), uint32(0); at != r.OuterBP; steps++ {
				if steps == r.Frames || at >= r.Words {
					panic(fmt.Sprintf("weft: record's saved-BP chain is broken at word %d (first %d, outermost %d, %d frames)", at, r.bpFirst(), r.OuterBP, r.Frames))
				}
				next := uint32(img[at])
				f.refs = append(f.refs, stackRef{at: base + at, target: (base + next) * uint32(wordSize)})
				f.words[base+at] = 0
				at = next
			}
		}
		pc, sp := r.PC, base*uint32(wordSize)
		for j := range r.Frames {
			d := descFor(pc)
			f.frames = append(f.frames, chunkFrame{pc: pc, sp: sp, fp: sp + d.size, d: d})
			sp += d.size
			if j+1 < r.Frames {
				pc = img[sp/uint32(wordSize)-base-1]
			}
		}
		next := base + frameWords
		if r.OuterBP != arch.NoBP {
			if i == len(recs)-1 {
				f.outerBP = int32(base + r.OuterBP)
			} else {
				nr := recs[i+1]
				f.refs = append(f.refs, stackRef{at: base + r.OuterBP, target: next*uint32(wordSize) + nr.BP})
			}
		}
		base = next
	}
	return f
}

// wholeDepth calls itself depth times, with a pointer and scalars live in
// every frame, and yields to s rounds times from the innermost; it checks
// what every frame held once the yields are over.
//
//go:noinline
func wholeDepth(s *scope.Scope, depth, rounds int) int {
	h := &capNode{v: depth}
	pad := [2]uintptr{uintptr(depth) * 3, ^uintptr(depth)}
	if depth > 0 {
		n := wholeDepth(s, depth-1, rounds)
		runtime.GC()
		if h.v != depth || pad[0] != uintptr(depth)*3 || pad[1] != ^uintptr(depth) {
			panic("weft: a frame's values changed across the yields")
		}
		return n + h.v
	}
	for range rounds {
		if _, perr := Yield(s); perr != nil {
			panic(perr)
		}
		runtime.GC()
	}
	return h.v
}

// A small region frozen for the first time, from the body's own call, is
// one record, thawed whole by the next resume (what a parked virtual
// thread keeps is then one header and no copied arguments); the capture
// after it, above the barrier, cuts the region into records again, and
// from then on a resume thaws only the top one. A region larger than
// wholeRecordWords is cut from the first capture.
func TestStackCopyWholeFirstRecord(t *testing.T) {
	requireStackCopy(t)
	defer func(eager bool) { eagerThaw = eager }(eagerThaw)
	eagerThaw = false
	for _, tc := range []struct {
		depth int
		whole bool
	}{{1, true}, {3, true}, {20, false}} {
		s := scope.New("whole")
		sum := 0
		const rounds = 4
		c := NewCont(s, func() { sum = wholeDepth(s, tc.depth, rounds) })
		c.Run(nil)
		recs := c.stack.chunk.records()
		st1 := c.Stats()
		if words := st1.BytesFrozen / uint64(wordSize); (words <= wholeRecordWords) != tc.whole {
			t.Fatalf("depth %d: the region is %d words: the test's depths no longer fit wholeRecordWords (%d)", tc.depth, words, wholeRecordWords)
		}
		if got := len(recs) == 1; got != tc.whole {
			t.Fatalf("depth %d: the first capture is %d records (%d frames, %d B); want one: %v", tc.depth, len(recs), st1.FramesFrozen, st1.BytesFrozen, tc.whole)
		}
		c.Run(nil)
		st2 := c.Stats()
		thawed := st2.FramesThawed - st1.FramesThawed
		if tc.whole && thawed != st1.FramesFrozen {
			t.Fatalf("depth %d: the first resume thawed %d of the record's %d frames", tc.depth, thawed, st1.FramesFrozen)
		}
		if !tc.whole && thawed >= st1.FramesFrozen {
			t.Fatalf("depth %d: the first resume thawed all %d frames of a large region", tc.depth, thawed)
		}
		if n := len(c.stack.chunk.records()); n < 2 {
			t.Fatalf("depth %d: the capture above the barrier is %d record; want the region cut", tc.depth, n)
		}
		if frozen := st2.FramesFrozen - st1.FramesFrozen; tc.whole && frozen != st1.FramesFrozen {
			t.Fatalf("depth %d: the capture after a whole thaw froze %d frames, want all %d", tc.depth, frozen, st1.FramesFrozen)
		}
		c.Run(nil)
		st3 := c.Stats()
		if thawed, frozen := st3.FramesThawed-st2.FramesThawed, st2.FramesFrozen-st1.FramesFrozen; tc.whole && thawed >= frozen {
			t.Fatalf("depth %d: the second resume thawed %d of %d frames; want only the top record", tc.depth, thawed, frozen)
		}
		for !c.IsDone() {
			c.Run(nil)
		}
		if want := tc.depth * (tc.depth + 1) / 2; sum != want {
			t.Fatalf("depth %d: sum %d, want %d", tc.depth, sum, want)
		}
		if st := c.Stats(); st.Yields != rounds || st.FramesThawed != st.FramesFrozen || st.BytesThawed < st.BytesFrozen {
			t.Fatalf("depth %d: counters %+v: want %d yields, every frame and byte frozen thawed", tc.depth, st, rounds)
		}
	}
}
