//go:build goexperiment.runtimesecret

package continuation_test

import (
	"runtime/secret"
	"testing"

	"github.com/weftrt/weft/pinning"
)

// TestPinSecretMode: a yield inside runtime/secret.Do pins with
// RuntimeFrame on the stack-copying backend. Secret mode belongs to the
// goroutine (Do counts it in its g, erases that goroutine's stack and
// registers as it returns): frozen, Do's frames and f's would put the
// secrets in the heap, and thawed on another goroutine they would end
// secret mode on a goroutine that never began it, leaving the first one
// in it. The portable backend suspends the body's own goroutine, which
// stays in secret mode throughout, and does not pin.
func TestPinSecretMode(t *testing.T) {
	pinCheck(t, pinScenario{
		reason: pinning.RuntimeFrame,
		provoke: func(yield func()) int {
			n := 1
			secret.Do(func() {
				n += 10
				yield()
				n += 100
			})
			return n
		},
		want: 111,
	})
}
