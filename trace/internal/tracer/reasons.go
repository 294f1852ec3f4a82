package tracer

import "fmt"

// reasonNames are the descriptions of weft's pinning.Reason values, which
// a pin event carries as a number. They must match reasonNames in weft's
// pinning/pinning.go (TestReasonNames): the tracer reads the target's
// binary and does not link weft.
var reasonNames = [...]string{
	1:  "critical section (pinning.Do)",
	2:  "native (cgo) frame",
	3:  "runtime frame",
	4:  "assembly frame without stack maps",
	5:  "reflect call frame",
	6:  "defer record",
	7:  "panic in progress",
	8:  "pointer to stack memory outside the continuation",
	9:  "frame the unwinder cannot describe",
	10: "thread locked (runtime.LockOSThread)",
}

// reason describes a pinning.Reason of the target.
func reason(r uint64) string {
	if r > 0 && r < uint64(len(reasonNames)) {
		return reasonNames[r]
	}
	return fmt.Sprintf("pinning.Reason(%d)", r)
}
