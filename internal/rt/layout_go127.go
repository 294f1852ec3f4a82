//go:build go1.27 && !go1.28 && !wasm

package rt

import "unsafe"

// moduledata mirrors the prefix of runtime.moduledata in Go 1.27, up to
// textsectmap: Go 1.27 added typedesclen between types and etypes, and
// itaboffset and itabsize before rodata (the typelinks and itablinks
// slices it dropped came after textsectmap).
type moduledata struct {
	moduledataPrefix
	types, typedesclen, etypes uintptr
	itaboffset, itabsize       uintptr
	rodata                     unsafe.Pointer // (a uintptr in the runtime; static data)
	gofunc                     unsafe.Pointer // go:func.* (a uintptr in the runtime; static data)
	epclntab                   uintptr
	textsectmap                []textsect
}

// genericMethods: Go 1.27 has generic methods, whose names the runtime
// prints with two elided lists of type arguments (see nameForPrint).
const genericMethods = true
