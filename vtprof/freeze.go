package vtprof

import (
	"fmt"
	"io"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft"
)

// freezeTypes are the freeze/thaw profile's sample types, each a type and
// a unit, in the order of a sample's values.
var freezeTypes = []string{
	"captures", "count",
	"templated", "count",
	"frozen_frames", "count",
	"frozen", "bytes",
	"thaws", "count",
	"thawed_frames", "count",
	"thawed", "bytes",
	"crossings", "count",
}

// freezeValues returns r's counts in the order of freezeTypes.
func freezeValues(r weft.FreezeRecord) []int64 {
	return []int64{
		int64(r.Captures), int64(r.Templated), int64(r.FramesFrozen), int64(r.BytesFrozen),
		int64(r.Thaws), int64(r.FramesThawed), int64(r.BytesThawed), int64(r.Crossings),
	}
}

// WriteFreezeProfile writes the engine's freeze/thaw profile to w, the
// analogue of JFR's jdk.ContinuationFreeze and jdk.ContinuationThaw: for
// each call chain at which continuations (virtual threads included) were
// frozen and thawed, the captures, those that took the fast path
// (templated), the frames and bytes frozen, the thaws, the frames and
// bytes thawed, and the return-barrier crossings, sampled at the rate
// that weft.SetFreezeProfileRate set (the profile is empty until then).
// Debug 0 writes a gzipped profile.proto with those sample types
// (captures, templated, frozen_frames, frozen, thaws, thawed_frames,
// thawed, crossings), debug 1 and above text. On the portable backend,
// which copies no frames, only captures and thaws are counted.
func WriteFreezeProfile(w io.Writer, debug int) error {
	recs := weft.FreezeProfile()
	if debug > 0 {
		var trs []textRecord
		for _, r := range recs {
			trs = append(trs, textRecord{values: freezeValues(r), stack: stackFrames(r.Stack)})
		}
		return writeText(w, fmt.Sprintf("--- freeze:\nrate=%d\n# captures templated frozen-frames frozen-bytes thaws thawed-frames thawed-bytes crossings @ stack", weft.FreezeProfileRate()), trs)
	}
	b := newBuilder(freezeTypes...)
	b.p.DefaultSampleType = "captures"
	for _, r := range recs {
		b.p.Sample = append(b.p.Sample, &profile.Sample{Value: freezeValues(r), Location: b.pcLocs(r.Stack)})
	}
	return b.p.Write(w)
}
