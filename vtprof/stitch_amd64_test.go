//go:build amd64 && !race && !msan && !asan

package vtprof

import (
	"context"
	"runtime"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft"
	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/scheduler"
)

// stitchCallers returns the PCs of its caller's stack, from a function
// inlined into it.
//
//go:noinline
func stitchCallers() []uintptr { return stitchInlined() }

// stitchInlined is inlined into stitchCallers.
func stitchInlined() []uintptr { return stitchPCs() }

// stitchPCs returns the PCs of its caller's stack.
//
//go:noinline
func stitchPCs() []uintptr {
	pcs := make([]uintptr, 64)
	return pcs[:runtime.Callers(2, pcs)]
}

// TestStitchInlinedLiveFrame checks that a sample whose last live frame
// holds an inlined call gets the frames below that frame once: the live
// location already has a line for each function inlined in it, and the
// frozen PCs, one per logical frame, are not repeated under it.
func TestStitchInlinedLiveFrame(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var pcs []uintptr
	vt, _ := s.Go(func(context.Context) error { pcs = stitchCallers(); return nil })
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	// pcs: stitchInlined's PC (physical), stitchCallers' (virtual), then
	// the body's frames. A sample whose live part is that physical frame,
	// with both functions' lines, then the return barrier.
	fn := func(id uint64, name string) *profile.Function {
		return &profile.Function{ID: id, Name: name, SystemName: name}
	}
	inl, outer := fn(1, "github.com/weftrt/weft/vtprof.stitchInlined"), fn(2, "github.com/weftrt/weft/vtprof.stitchCallers")
	barrier := uint64(arch.ThawPC() + 1)
	live := &profile.Location{ID: 1, Address: uint64(pcs[0] - 1), Line: []profile.Line{{Function: inl}, {Function: outer}}}
	thaw := &profile.Location{ID: 2, Address: barrier, Line: []profile.Line{{Function: fn(3, "arch.Thaw")}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}},
		Function:   []*profile.Function{inl, outer, thaw.Line[0].Function},
		Location:   []*profile.Location{live, thaw},
		Sample: []*profile.Sample{{
			Location: []*profile.Location{live, thaw},
			Value:    []int64{1},
			Label:    map[string][]string{scheduler.LabelMount: {"k"}},
		}},
	}
	Stitch(p, map[string][]uintptr{"k": pcs})
	fns := sampleFuncs(p.Sample[0])
	if !weft.IsBarrierPC(uintptr(barrier)) {
		// The portable backend has no barrier: nothing is stitched.
		if len(fns) != 3 {
			t.Errorf("portable backend: sample %v, want its own three lines", fns)
		}
		return
	}
	if n := countFunc(fns, ".stitchCallers"); n != 1 {
		t.Errorf("stitchCallers %d times in the stitched sample %v, want once", n, fns)
	}
	if n := countFunc(fns, "scheduler.vthreadBody"); n != 1 {
		t.Errorf("the body %d times in the stitched sample %v, want once", n, fns)
	}
}
