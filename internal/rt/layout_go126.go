//go:build go1.26 && !go1.27 && !wasm

package rt

import "unsafe"

// Supported reports whether this package has mirrors of the runtime's
// layout for the Go release it was built with.
const Supported = true

// moduledata mirrors the prefix of runtime.moduledata (runtime/symtab.go)
// in Go 1.26, up to textsectmap. Go 1.26 added epclntab after gofunc.
type moduledata struct {
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
	epclntab              uintptr

	textsectmap []textsect
}
