//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
	"testing"

	"github.com/weftrt/weft/scope"
)

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
