package bench

import (
	"fmt"
	"testing"

	"github.com/weftrt/weft"
)

// BenchmarkFreezeProfile is BenchmarkRoundTrip's weft and weft.Pull
// peers at depth 1 with the engine's freeze/thaw profile on
// (weft.SetFreezeProfileRate): at rate 1 every freeze and thaw is
// recorded, at rate 100 one in 100 on average. RoundTrip is the same op
// with the profile off.
func BenchmarkFreezeProfile(b *testing.B) {
	for _, rate := range []int{1, 100} {
		for _, pr := range peers[:2] { // weft, weft.Pull
			b.Run(fmt.Sprintf("impl=%s/rate=%d", pr.name, rate), func(b *testing.B) {
				b.ReportAllocs()
				p := pr.new(1, nil)
				weft.SetFreezeProfileRate(rate)
				defer weft.SetFreezeProfileRate(0)
				p.measure(b)
			})
		}
	}
}
