//go:build cgo && amd64

package pinning_test

import (
	"testing"

	"github.com/weftrt/weft/internal/cgotest"
	"github.com/weftrt/weft/pinning"
)

// A Go function called back from C has the runtime's cgo callback frames
// beneath it: yielding from it would freeze them.
func TestFrameReasonCgoCallback(t *testing.T) {
	requireSupported(t)
	var got map[pinning.Reason][]string
	cgotest.CallFromC(func() { got, _ = region(thisPkg + "TestFrameReasonCgoCallback") })
	if len(got[pinning.NativeFrame]) == 0 {
		t.Fatalf("no NativeFrame under a cgo callback: %v", got)
	}
	t.Logf("pinned frames under a cgo callback: %v", got)
}
