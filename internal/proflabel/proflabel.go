// Package proflabel reads and sets the calling goroutine's pprof labels:
// the runtime's g.labels, which runtime/pprof reads and sets the same way
// and the CPU profiler's signal handler reads. It is the one place weft
// declares these linknames; the engine, the scheduler and vnet use it.
package proflabel

import "unsafe"

// Get returns the calling goroutine's profiler labels.
//
//go:linkname Get runtime/pprof.runtime_getProfLabel
func Get() unsafe.Pointer

// Set sets the calling goroutine's profiler labels, as
// pprof.SetGoroutineLabels does.
//
//go:linkname Set runtime/pprof.runtime_setProfLabel
func Set(labels unsafe.Pointer)
