package scheduler

import "github.com/weftrt/weft"

// ContStats returns the engine counters of vt's continuation, which vt
// holds until it ends.
func ContStats(vt *VThread) weft.Stats {
	if vt.cont == nil {
		panic("scheduler.ContStats: the virtual thread has ended, and its continuation record went to its carrier")
	}
	return vt.cont.Stats()
}
