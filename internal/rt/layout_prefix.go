//go:build go1.25 && !go1.28 && !wasm

package rt

import "unsafe"

// Supported reports whether this package has mirrors of the runtime's
// layout for the Go release it was built with.
const Supported = true

// moduledataPrefix mirrors runtime.moduledata (runtime/symtab.go) from its
// start up to gcbss, identical in Go 1.25, 1.26 and 1.27. Embedded first
// in each release's moduledata, it keeps the same layout as these fields
// written inline.
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
}
