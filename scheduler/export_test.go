package scheduler

import "github.com/weftrt/weft"

// WithContStats returns o for a scheduler whose virtual threads count
// what their continuations do, for ContStats.
func WithContStats(o Options) Options {
	o.contStats = true
	return o
}

// ContStats returns the engine counters of vt's continuation, which vt
// holds until it ends, if its scheduler was made WithContStats.
func ContStats(vt *VThread) weft.Stats {
	if !vt.s.opts.contStats {
		panic("scheduler.ContStats: the scheduler counts nothing; make it with WithContStats")
	}
	if vt.cont == nil {
		panic("scheduler.ContStats: the virtual thread has ended, and its continuation record went to its carrier or was dropped")
	}
	return vt.cont.Stats()
}
