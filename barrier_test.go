//go:build amd64 && !race && !msan && !asan

package weft

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/internal/thawstat"
)

// bigFrame is a frame with a large local array: a record holding it needs
// more stack than a fresh goroutine has, so the return barrier must grow
// the stack (arch.Thaw's pinned growth) while it holds the result
// registers of the frame that returned into it.
//
//go:noinline
func bigFrame(c *stackState, depth, yields int) (*capNode, float64, int) {
	var big [6 << 10]uintptr // 48 KiB
	for i := range big {
		big[i] = uintptr(depth*i) ^ 0x5a5a
	}
	p, f, n := smallFrame(c, depth-1, yields)
	// The results came back through the barrier, from a frame whose
	// record was thawed before this one was grown room for.
	if p == nil || p.v != n*3 || f != float64(n)/3 {
		panic(fmt.Sprintf("depth %d: results %v %v %d after the barrier", depth, p, f, n))
	}
	for i := range big {
		if big[i] != uintptr(depth*i)^0x5a5a {
			panic(fmt.Sprintf("depth %d: big[%d] changed", depth, i))
		}
	}
	return &capNode{v: (n + 1) * 3}, float64(n+1) / 3, n + 1
}

//go:noinline
func smallFrame(c *stackState, depth, yields int) (*capNode, float64, int) {
	if depth <= 0 {
		for range yields {
			if !stackYield(c) {
				panic(c.refusal())
			}
		}
		for range 8 { // collections while the big frames are frozen shrink this stack
			runtime.GC()
		}
		return &capNode{v: 0}, 0, 0
	}
	if depth%3 == 0 && depth >= 6 {
		return bigFrame(c, depth, yields)
	}
	p, f, n := smallFrame(c, depth-1, yields)
	if p == nil || p.v != n*3 || f != float64(n)/3 {
		panic(fmt.Sprintf("depth %d: results %v %v %d after the barrier", depth, p, f, n))
	}
	runtime.GC()
	return &capNode{v: (n + 1) * 3}, float64(n+1) / 3, n + 1
}

// The barrier grows the stack when the next record does not fit, keeping
// the result registers of the frame that returned into it, pointers
// included, while the collector runs.
func TestBarrierGrowsStack(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	// The test needs records: under WEFT_THAW=eager there is one.
	defer func(eager bool) { eagerThaw = eager }(eagerThaw)
	eagerThaw = false
	defer collectWhile()()
	for _, depth := range []int{6, 10, 31} {
		shorts := thawstat.Grown.Load()
		c := &stackState{}
		var n int
		c.body = func() { _, _, n = smallFrame(c, depth, 3) }
		runToEnd(t, c, 10)
		if n != depth {
			t.Fatalf("depth %d: the body computed %d", depth, n)
		}
		grown := thawstat.Grown.Load() - shorts
		if grown == 0 {
			t.Fatalf("depth %d: the barrier never had to grow the stack: the test does not test what it says", depth)
		}
		t.Logf("depth %d: the barrier grew the stack %d times", depth, grown)
	}
}
