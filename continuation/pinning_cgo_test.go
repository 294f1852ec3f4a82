//go:build cgo

package continuation_test

import (
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/cgotest"
	"github.com/weftrt/weft/pinning"
)

// TestPinNativeFrame yields from a Go function called back from C: the
// runtime's cgo callback frames, and the C frames beneath them, lie between
// the yield and the body. In a file of its own because it needs cgo.
//
// The portable backend pins here too: a cgo callback locks the goroutine
// to its thread, and the runtime's coroutine switch, which the portable
// backend parks with, would kill the process ("coro: OS thread locking
// must match locking at coroutine creation").
func TestPinNativeFrame(t *testing.T) {
	t.Run("Yield", func(t *testing.T) {
		pinCheck(t, pinScenario{
			reason:       pinning.NativeFrame,
			portablePins: true,
			provoke: func(yield func()) int {
				n := 1
				cgotest.CallFromC(func() {
					n += 10
					yield()
					n += 100
				})
				return n
			},
			want: 111,
		})
	})
	// The cgo callback is in the outer continuation's region, between the
	// outer body and the inner Run.
	t.Run("Nested", func(t *testing.T) {
		if !pinStackCopy() {
			// The inner continuation is first run inside the callback, on
			// a locked thread; the test then resumes it outside, which the
			// runtime forbids for a coroutine (docs/limitations.md).
			t.Skip("portable backend: a continuation first run inside a cgo callback must be resumed with the same thread locking; " + continuation.Backend())
		}
		pinNested(t, pinning.NativeFrame, true, cgotest.CallFromC)
	})
}
