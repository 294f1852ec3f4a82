// Package arch holds every architecture-specific fact weft relies on.
//
// On every architecture it identifies the calling goroutine (G). The
// engine uses G to find the continuations mounted on it. On amd64 it
// holds what the stack-copying backend needs of the machine. That is the
// frame link layout and the caller's PC and SP (CallerPCSP). It is also
// the control transfers: Enter, the entry trampoline that calls a body and
// thaws a chunk into it; JumpBack, which discards frozen frames; EnterPC,
// the boundary a freeze walks up to. Everything else the backend knows of
// a frame comes from the runtime's own tables (internal/rt).
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
