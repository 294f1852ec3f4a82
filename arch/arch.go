// Package arch holds every architecture-specific fact weft relies on.
//
// Today that is one thing: a cheap way to identify the calling goroutine,
// which the engine uses to find the continuations mounted on it. The
// stack-copying backend adds the amd64 frame layout and its assembly here
// (entry trampoline, yield-point capture, the jump into thawed frames).
package arch

// G returns an identifier of the calling goroutine that is unique among
// live goroutines and stable for the goroutine's lifetime.
//
// Where HasG is true it is the address of the goroutine's runtime g
// structure, read in a few instructions of assembly. Elsewhere it is the
// goroutine id parsed from runtime.Stack, which is correct but costs
// about a microsecond.
//
// An identifier may be reused once its goroutine has exited.
func G() uintptr { return getg() }
