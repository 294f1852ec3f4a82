package bench

import (
	"iter"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// This file builds the peers of the life-cycle benchmarks: a generator
// created, used briefly and stopped; a recursive sequence walked through
// a pull iterator; a continuation created and run to its end; and frames
// pushed, suspended and unwound in a loop.

// pullTake creates a pull iterator over count(n) with pull, takes take
// values from it, stops it, and returns their sum.
func pullTake(pull func(iter.Seq[int]) (func() (int, bool), func()), n, take int) int {
	next, stop := pull(count(n))
	sum := 0
	for range take {
		v, ok := next()
		if !ok {
			break
		}
		sum += v
	}
	stop()
	return sum
}

// pulls are the pull-iterator peers, in the order reported.
var pulls = []struct {
	name string
	pull func(iter.Seq[int]) (func() (int, bool), func())
}{
	{"weft.Pull", continuation.Pull[int]},
	{"iter.Pull", iter.Pull[int]},
}

// treeSize is the number of nodes of the tree the walk benchmark sums.
const treeSize = 1 << 16

// node is a node of a binary search tree.
type node struct {
	left, right *node
	v           int
}

// balanced returns a balanced tree of the values lo, lo+1, ..., hi-1.
func balanced(lo, hi int) *node {
	if lo >= hi {
		return nil
	}
	mid := lo + (hi-lo)/2
	return &node{left: balanced(lo, mid), right: balanced(mid+1, hi), v: mid}
}

// all is the tree's in-order sequence, written recursively as one would:
// every value is yielded from under as many frames as its depth.
func (t *node) all() iter.Seq[int] {
	return func(yield func(int) bool) { t.walk(yield) }
}

func (t *node) walk(yield func(int) bool) bool {
	if t == nil {
		return true
	}
	return t.left.walk(yield) && yield(t.v) && t.right.walk(yield)
}

// newRunRun creates a continuation of s whose body yields once, runs it
// to the yield and then to its end.
func newRunRun(s *scope.Scope, body func()) {
	c := continuation.New(s, body)
	c.Run()
	c.Run()
	if !c.IsDone() {
		panic("bench: continuation did not finish")
	}
}

// unwinders are the peers of the unwinding benchmark. Each is a peer
// whose run does n iterations of a body that recurses depth fresh
// frames, suspends at the bottom, and when resumed returns through all of
// them (Loom's "pattern B").
var unwinders = []struct {
	name string
	new  func(depth int) peer
}{
	{"weft", newWeftUnwinder},
	{"iter.Pull", newPullUnwinder},
}

func newWeftUnwinder(depth int) peer {
	s := scope.New("bench")
	stop := false
	yields := 0
	suspend := func() {
		yields++
		continuation.Yield(s)
	}
	c := continuation.New(s, func() {
		for !stop {
			recurse(depth, suspend)
		}
	})
	c.Run()
	return weftPeer(c, &stop, &yields)
}

func newPullUnwinder(depth int) peer {
	yields := 0
	next, stop := iter.Pull(func(yield func(struct{}) bool) {
		more := true
		suspend := func() {
			yields++
			more = yield(struct{}{})
		}
		for more {
			recurse(depth, suspend)
		}
	})
	next()
	return nextPeer(next, stop, &yields)
}
