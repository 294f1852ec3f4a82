package arch

import "unsafe"

// FrameLinkSize is the size of what a call pushes beneath the callee's
// frame: on amd64, the return address. A frame's caller resumes at the word
// just below the callee's entry SP.
const FrameLinkSize = 8

// CallerPCSP returns the PC at which its caller resumes after the call, and
// the caller's SP at that PC. With the caller's metadata (its SP delta at
// that PC) they are where a frame walk of the calling goroutine starts.
//
// It is in g_amd64.s, beside getgp: both are where a walk of the calling
// goroutine's stack starts.
//
// sp is an unsafe.Pointer. Kept in a variable of the goroutine's own
// frames, it moves with the stack. Converted to a uintptr, it is stale
// after any call that may grow the stack.
//
//go:noescape
func CallerPCSP() (pc uintptr, sp unsafe.Pointer)
