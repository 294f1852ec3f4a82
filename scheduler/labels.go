package scheduler

import (
	"unsafe"

	"github.com/weftrt/weft/internal/proflabel"
)

// A virtual thread has pprof labels of its own, as a goroutine does. It
// starts with those of the goroutine or virtual thread that called Go.
// Labels it sets (pprof.Do, pprof.SetGoroutineLabels) stay with it when
// it parks and resumes on another carrier. A carrier has its own labels
// back whenever it runs no virtual thread. The runtime keeps a
// goroutine's labels in its g, where the CPU profiler's signal handler
// reads them. So run puts the virtual thread's labels there while it
// runs, and takes them back after (docs/api.md, "Profiler labels").

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
