package continuation_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// pinFrameOwner has a range-over-func defer record, which pins, and yields
// through pinFrameInlined from the loop body. The loop's iterator is
// inlined into it: the return address in its frame is then one that
// runtime.CallersFrames attributes first to pinFrameInlined, a function
// without any defer.
//
//go:noinline
func pinFrameOwner(yield func()) (n int) {
	for range pinFrameInlined {
		defer func() { n++ }()
		yield()
	}
	return 10
}

// pinFrameInlined is small enough to be inlined into pinFrameOwner.
func pinFrameInlined(body func() bool) { body() }

// TestPinFrameDeferRecordOwner: a yield pinned by a defer record (a
// range-over-func one: the others move) names the
// function whose frame has the record, not a function inlined into it that
// was calling out when the yield came (http.ReadRequest's defer, not
// net/textproto.(*Reader).ReadMIMEHeader, a defer-free wrapper inlined
// into it): here the frame named is not pinFrameInlined.
func TestPinFrameDeferRecordOwner(t *testing.T) {
	s := scope.New("pinframe")
	var (
		perr *pinning.Error
		got  int
	)
	c := continuation.New(s, func() {
		defer func() {
			if v := recover(); v != nil {
				err, _ := v.(error)
				if !errors.As(err, &perr) {
					panic(v)
				}
			}
		}()
		got = pinFrameOwner(func() { continuation.Yield(s) })
	})
	c.Run()
	if !pinStackCopy() {
		// The portable backend does not pin on defer records.
		if c.IsDone() {
			t.Fatal("the yield did not suspend on the portable backend")
		}
		c.Run()
		if !c.IsDone() || perr != nil || got != 11 {
			t.Fatalf("portable: done %v, pinning error %v, result %d", c.IsDone(), perr, got)
		}
		return
	}
	if perr == nil {
		t.Fatalf("the yield did not pin (done %v)", c.IsDone())
	}
	if perr.Reason != pinning.DeferRecord {
		t.Fatalf("pinned with %v, want %v", perr.Reason, pinning.DeferRecord)
	}
	if fn := perr.Frame.Function; !strings.HasSuffix(fn, ".pinFrameOwner") {
		t.Errorf("the pinning frame is %q (%s:%d), want pinFrameOwner, whose frame has the defer record", fn, perr.Frame.File, perr.Frame.Line)
	}
	if !strings.HasSuffix(perr.Frame.File, "pinframe_test.go") || perr.Frame.Line == 0 {
		t.Errorf("the pinning frame's position is %s:%d", perr.Frame.File, perr.Frame.Line)
	}
}
