//go:build amd64 && !race && !msan && !asan

package weft

// hooks are the engine's test hooks, in one place: production code never
// sets them. Each is tested where it would run, at the cost of a load and
// a branch while it is nil.
var hooks struct {
	// cleared, if set, is told after each capture of some words (region
	// word indexes). They are words of stack objects no live pointer
	// reaches, which held an address in the stack outside the record.
	// They are garbage, which the image holds as zero: the address would
	// dangle once the frames are thawed elsewhere. The chunk does not keep
	// them.
	cleared func(c *stackChunk, words []uint32)
	// templateAt, if set, is called at each step of templateAt's walk,
	// to move the stack there as a descriptor lookup that misses the
	// cache may.
	templateAt func()
	// yieldCounts, if set, is where stackYield's captures count what they
	// froze: the tests' stackYield records belong to no Cont.
	yieldCounts *counters
	// recordLoop, if set, makes fastCapture take its loop over records
	// (fastRecords) for a one-record template too.
	recordLoop bool
}
