//go:build amd64 && !race && !msan && !asan

package weft

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// capWithRecords defers two calls in a loop (heap records of this frame)
// and captures the region from here to boundary, inside pinning.Do if pin
// is set. It returns the capture's error and g._defer before and after.
//
//go:noinline
func capWithRecords(c *stackChunk, boundary uintptr, ran *int, pin bool) (err error, before, after unsafe.Pointer) {
	for range 2 {
		defer func() { *ran++ }()
	}
	g := rt.CurG()
	before = g.Defer
	if pin {
		pinning.Do(func() { err = c.capture(boundary, false, nil) })
	} else {
		err = c.capture(boundary, false, nil)
	}
	return err, before, g.Defer
}

// TestCaptureUnlinksDeferRecordsOnCommit: a capture that commits takes
// the region's defer records off g's chain (g._defer becomes the first
// record outside the region) and its record carries them (RecordMoved,
// two in its table). Its frames never return here, so the calls do not
// run. A capture that fails for another reason leaves the chain as it
// was, and the calls run as the frame returns.
func TestCaptureUnlinksDeferRecordsOnCommit(t *testing.T) {
	keepStill(t)
	b := capBoundary(capCall)
	outside := rt.CurG().Defer

	var c stackChunk
	var err error
	var before, after unsafe.Pointer
	ran := 0
	capCall(func() { err, before, after = capWithRecords(&c, b, &ran, false) })
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	if before == nil || after != outside {
		t.Errorf("g._defer %p before the capture, %p after; want a record before and %p (outside the region) after", before, after, outside)
	}
	r := c.recordEnding(int(c.MemTop))
	if r.Flags&(arch.RecordMoved|arch.RecordDefers) != arch.RecordMoved|arch.RecordDefers {
		t.Errorf("the record's flags are %#x, want RecordMoved and RecordDefers", r.Flags)
	}
	if n := c.memory()[r.end-arch.RecordHeaderWords-1]; n != 2 {
		t.Errorf("the record carries %d defer records, want 2", n)
	}
	if ran != 0 {
		t.Errorf("%d of the moved deferred calls ran", ran)
	}

	var c2 stackChunk
	ran = 0
	capCall(func() { err, before, after = capWithRecords(&c2, b, &ran, true) })
	var pe *errPinned
	if !errors.As(err, &pe) || pe.reason != pinning.CriticalSection {
		t.Fatalf("capture inside pinning.Do: %v, want CriticalSection", err)
	}
	if after != before || ran != 2 {
		t.Errorf("after a failed capture g._defer is %p (was %p) and %d of 2 deferred calls ran", after, before, ran)
	}
}
