//go:build go1.25 && !go1.27 && !wasm

package rt

import "unsafe"

// Supported reports whether this package has mirrors of the runtime's
// layout for the Go release it was built with.
const Supported = true

// moduledataPrefix mirrors runtime.moduledata (runtime/symtab.go) from its
// start up to gofunc, identical in Go 1.25 and 1.26. Embedded first in
// moduledata, it keeps the same layout as these fields written inline.
type moduledataPrefix struct {
	pcHeader     unsafe.Pointer
	funcnametab  []byte
	cutab        []uint32
	filetab      []byte
	pctab        []byte
	pclntable    []byte
	ftab         []functab
	findfunctab  uintptr
	minpc, maxpc uintptr

	text, etext           uintptr
	noptrdata, enoptrdata uintptr
	data, edata           uintptr
	bss, ebss             uintptr
	noptrbss, enoptrbss   uintptr
	covctrs, ecovctrs     uintptr
	end, gcdata, gcbss    uintptr
	types, etypes         uintptr
	rodata                unsafe.Pointer // (a uintptr in the runtime; static data)
	gofunc                unsafe.Pointer // go:func.* (a uintptr in the runtime; static data)
}
