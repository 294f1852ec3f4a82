package bench

import (
	"fmt"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// deferRecords defers k calls in a loop, which the compiler cannot
// open-code: k runtime defer records on the heap while f runs.
//
//go:noinline
func deferRecords(k int, f func()) {
	for range k {
		defer func() {}()
	}
	f()
}

// newWeftRecords is newWeft at depth 1 with a frame that has k runtime
// defer records above the yield loop: every yield moves them with the
// frame, and every resume links them back.
func newWeftRecords(k int) peer {
	s := scope.New("bench")
	stop := false
	yields := 0
	c := continuation.New(s, func() {
		deferRecords(k, func() {
			for !stop {
				yields++
				continuation.Yield(s)
			}
		})
	})
	c.Run()
	return weftPeer(c, &stop, &yields)
}

// BenchmarkRoundTripDeferRecord is the weft round trip with a frame above
// the yield that has k runtime defer records (k = 0: the same frames, no
// records, the template's fast path).
func BenchmarkRoundTripDeferRecord(b *testing.B) {
	for _, k := range []int{0, 1, 4} {
		b.Run(fmt.Sprintf("impl=weft/records=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			p := newWeftRecords(k)
			p.measure(b)
		})
	}
}
