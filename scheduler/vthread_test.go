package scheduler

import (
	"testing"
	"unsafe"
)

// Every virtual thread carries a VThread: it keeps to the 128-byte size
// class on 64-bit platforms (docs/benchmarks.md, bytes per parked
// virtual thread). A field added must pay for itself: the channel a pinned
// park waits on is the carrier's, and the kept channel node is one
// pointer.
func TestVThreadSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are budgeted for 64-bit platforms")
	}
	if n := unsafe.Sizeof(VThread{}); n > 128 {
		t.Fatalf("VThread is %d bytes, over its 128-byte budget (a size class)", n)
	}
}
