//go:build go1.25 && !go1.26 && !wasm

package rt

import "unsafe"

// moduledata mirrors the prefix of runtime.moduledata in Go 1.25, up to
// textsectmap, which follows gofunc directly.
type moduledata struct {
	moduledataPrefix
	types, etypes uintptr
	rodata        unsafe.Pointer // (a uintptr in the runtime; static data)
	gofunc        unsafe.Pointer // go:func.* (a uintptr in the runtime; static data)
	textsectmap   []textsect
}

// genericMethods: the release has no generic methods, so the runtime
// prints every symbol name with one elided list of type arguments.
const genericMethods = false
