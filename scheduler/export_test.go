package scheduler

import "github.com/weftrt/weft"

// ContStats returns the engine counters of vt's continuation.
func ContStats(vt *VThread) weft.Stats { return vt.cont.Stats() }
