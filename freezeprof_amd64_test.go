//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/scope"
)

// fpOnce recurses depth frames, yields at the bottom, and again in each
// frame on the way back: each resume after the first returns one frame
// into the return barrier.
//
//go:noinline
func fpOnce(s *scope.Scope, depth int) int {
	if depth == 0 {
		Yield(s)
		return 0
	}
	n := fpOnce(s, depth-1) + 1
	Yield(s)
	return n
}

// A body that returns frame by frame into the return barrier, yielding
// in each frame, crosses the barrier on the resumes whose thaw runs out of
// the record it started in: the profile counts, for each resume, the
// records it thawed less the first (a thaw's records, innermost first,
// are read before it), and for the last, which returns through every
// frame, all of them less one.
func TestFreezeProfileCrossings(t *testing.T) {
	if ActiveBackend() != StackCopying {
		t.Skip("the portable backend has no return barrier")
	}
	withFreezeRate(t, 1)
	const depth = 8
	s := scope.New("fp")
	c := NewCont(s, func() { fpOnce(s, depth) })
	c.Run(nil)
	prev, _ := freezeRecordsOf(".fpOnce")
	total := uint64(0)
	for i := 0; !c.IsDone(); i++ {
		if i > 100 {
			t.Fatal("the body did not finish")
		}
		var recFrames []uint64
		for _, r := range c.stack.chunk.records() {
			recFrames = append(recFrames, uint64(r.Frames))
		}
		before := c.Stats()
		c.Run(nil)
		runtime.GC()
		thawed := c.Stats().FramesThawed - before.FramesThawed
		sum, _ := freezeRecordsOf(".fpOnce")
		thaws, crossings := sum.Thaws-prev.Thaws, sum.Crossings-prev.Crossings
		if thaws != 1 || sum.FramesThawed-prev.FramesThawed != thawed {
			t.Fatalf("resume %d: %d thaws of %d frames recorded, want 1 of %d (Stats)", i, thaws, sum.FramesThawed-prev.FramesThawed, thawed)
		}
		prev = sum
		// The records this resume thawed: those whose frames add up to
		// what Stats says it thawed.
		k, n := 0, uint64(0)
		for k < len(recFrames) && n < thawed {
			n += recFrames[k]
			k++
		}
		if n != thawed {
			t.Fatalf("resume %d thawed %d frames, not whole records of %v", i, thawed, recFrames)
		}
		if c.IsDone() && k != len(recFrames) {
			t.Fatalf("the last resume thawed %d of %d records", k, len(recFrames))
		}
		if crossings != uint64(k-1) {
			t.Fatalf("resume %d: %d barrier crossings recorded, want %d (records %v, %d frames thawed)", i, crossings, k-1, recFrames, thawed)
		}
		total += crossings
	}
	// Eager thaw freezes and thaws the whole region as one record.
	if total == 0 && !eagerThaw {
		t.Error("no barrier crossings recorded over the run")
	}
}

// A resumed body that panics ends its sampled thaw's run without a
// capture: the pending thaw is dropped, not left for another chunk at
// the same address.
func TestFreezeProfilePanicDropsThaw(t *testing.T) {
	if ActiveBackend() != StackCopying {
		t.Skip("the portable backend keeps no pending thaws")
	}
	withFreezeRate(t, 1)
	s := scope.New("fp")
	c := NewCont(s, func() {
		fpOnce(s, 3)
		panic("fp")
	})
	for !c.IsDone() {
		func() {
			defer func() { recover() }()
			c.Run(nil)
		}()
		runtime.GC()
	}
	pendingThaws.mu.Lock()
	_, pending := pendingThaws.m[uintptr(unsafe.Pointer(&c.stack.chunk))]
	pendingThaws.mu.Unlock()
	if pending {
		t.Error("the panicking run's sampled thaw is still pending")
	}
}
