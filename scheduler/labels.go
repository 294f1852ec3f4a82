package scheduler

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// A virtual thread has pprof labels of its own, as a goroutine does: it
// starts with those of the goroutine or virtual thread that called Go,
// labels it sets (pprof.Do, pprof.SetGoroutineLabels) stay with it when
// it parks and resumes on another carrier, and a carrier has its own back
// whenever it is not running one. The runtime keeps a goroutine's labels
// in its g, which the CPU profiler's signal handler reads: run puts the
// virtual thread's there for as long as it runs, and takes them back
// (docs/api.md, "Profiler labels").

// profLabel and setProfLabel are proflabel.Get and proflabel.Set.
func profLabel() unsafe.Pointer          { return proflabel.Get() }
func setProfLabel(labels unsafe.Pointer) { proflabel.Set(labels) }

// labels returns vt's profiler labels: nil unless it has some. Read by the
// goroutine running vt, or before vt is published.
func (vt *VThread) labels() unsafe.Pointer {
	if r := vt.rare.Load(); r != nil {
		return r.labels
	}
	return nil
}

// keepLabels records l as vt's profiler labels: what the goroutine that
// ran vt had when vt parked or yielded. Called on that goroutine.
func (vt *VThread) keepLabels(l unsafe.Pointer) {
	if r := vt.rare.Load(); r != nil {
		r.labels = l
		return
	}
	if l == nil {
		return
	}
	vt.joinMu.Lock()
	vt.rareLocked().labels = l
	vt.joinMu.Unlock()
}
