//go:build cgo

package vtprof

import (
	"testing"

	"github.com/weftrt/weft/internal/cgotest"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scheduler"
)

// cgoPark parks the calling virtual thread in a cgo callback, whose C
// frames keep it from being suspended.
//
//go:noinline
func cgoPark() {
	cgotest.CallFromC(scheduler.Park)
}

func TestPinProfileCgoCallback(t *testing.T) {
	s := blockPinned(t, cgoPark)
	checkPinned(t, s, pinning.NativeFrame, "", ".cgoPark")
}
