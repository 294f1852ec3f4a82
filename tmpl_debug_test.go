package weft

import (
	"testing"

	"github.com/weftrt/weft/scope"
)

func BenchmarkEngineRoundTrip(b *testing.B) {
	s := scope.New("x")
	stop := false
	c := NewCont(s, func() {
		for !stop {
			Yield(s)
		}
	})
	c.Run(nil)
	b.ResetTimer()
	for range b.N {
		c.Run(nil)
	}
	stop = true
	c.Run(nil)
}
