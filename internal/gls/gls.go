// Package gls maps a goroutine to the continuation whose body it is running.
//
// It is the one piece of per-goroutine state weft keeps. Both the engine
// (package weft) and package pinning need it, and neither may import the
// other's internals, so it lives here. Entries are added when a goroutine
// starts running a continuation body and removed before that goroutine
// ends, so the table never outlives what it describes and holds nothing a
// user must reset.
package gls

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/weftrt/weft/arch"
)

// Local is the goroutine-local record of one continuation.
type Local struct {
	// Owner is the engine's continuation record.
	Owner any

	// pins counts the pinning.Do critical sections open in this
	// continuation's own frames; pinPC is the call site of the outermost.
	pins  atomic.Int32
	pinPC uintptr
}

// EnterCritical records entry to a pinning.Do critical section whose call
// site is pc (0 if unknown).
func (l *Local) EnterCritical(pc uintptr) {
	if l.pins.Add(1) == 1 {
		l.pinPC = pc
	}
}

// ExitCritical records the end of a critical section.
func (l *Local) ExitCritical() {
	if l.pins.Add(-1) == 0 {
		l.pinPC = 0
	}
}

// Pinned reports whether a critical section is open in this continuation's
// frames, and the call site of the outermost one.
func (l *Local) Pinned() (bool, uintptr) {
	if l.pins.Load() == 0 {
		return false, 0
	}
	return true, l.pinPC
}

// PinFrame resolves a critical-section call site to a frame.
func PinFrame(pc uintptr) runtime.Frame {
	if pc == 0 {
		return runtime.Frame{}
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return f
}

var table sync.Map // arch.G() -> *Local

// Bind records that the calling goroutine runs the continuation described
// by l. It returns the key to pass to Unbind.
func Bind(l *Local) uintptr {
	g := arch.G()
	table.Store(g, l)
	return g
}

// Unbind removes the record made by Bind.
func Unbind(g uintptr) { table.Delete(g) }

// Current returns the record bound to the calling goroutine, or nil.
func Current() *Local { return Of(arch.G()) }

// Of returns the record bound to goroutine g, or nil.
func Of(g uintptr) *Local {
	v, ok := table.Load(g)
	if !ok {
		return nil
	}
	return v.(*Local)
}
