package bench

import (
	"iter"

	"github.com/weftrt/weft/continuation"
)

// genLen is the length of the sequence the generator benchmarks sum.
const genLen = 1000

// genSum is 0 + 1 + ... + genLen-1.
const genSum = genLen * (genLen - 1) / 2

// count yields 0, 1, ..., n-1.
func count(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// sumRange sums seq with a range-over-func loop: no coroutine at all.
func sumRange(seq iter.Seq[int]) int {
	sum := 0
	for v := range seq {
		sum += v
	}
	return sum
}

// sumPull sums seq through a pull iterator made by pull, stopping it at
// the end as a caller must.
func sumPull(pull func(iter.Seq[int]) (func() (int, bool), func()), seq iter.Seq[int]) int {
	next, stop := pull(seq)
	defer stop()
	sum := 0
	for {
		v, ok := next()
		if !ok {
			return sum
		}
		sum += v
	}
}

var generators = []struct {
	name string
	sum  func(iter.Seq[int]) int
}{
	{"weft.Pull", func(seq iter.Seq[int]) int { return sumPull(continuation.Pull[int], seq) }},
	{"iter.Pull", func(seq iter.Seq[int]) int { return sumPull(iter.Pull[int], seq) }},
	{"range", sumRange},
}
