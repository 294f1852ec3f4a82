//go:build go1.25 && !go1.28 && !wasm

package rt

import _ "unsafe" // for go:linkname

// findfunc is runtime.findfunc, which returns a runtime.funcInfo: a
// *_func and its *moduledata, the same two words as Func.
//
//go:linkname findfunc runtime.findfunc
//go:noescape
func findfunc(pc uintptr) Func

// FindFunc returns the metadata of the function containing pc; the result
// is invalid if pc is not in Go code.
func FindFunc(pc uintptr) Func { return findfunc(pc) }
