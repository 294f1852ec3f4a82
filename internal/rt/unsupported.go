//go:build !go1.25 || go1.28 || wasm

package rt

import "unsafe"

// Supported reports whether this package has mirrors of the runtime's
// layout for the Go release it was built with.
const Supported = false

// moduledata is not mirrored for this Go release.
type moduledata struct {
	funcnametab, pctab []byte
	ftab               []functab
	text, etext        uintptr
	minpc, maxpc       uintptr
	gofunc, rodata     unsafe.Pointer
	textsectmap        []textsect
}

// FindFunc finds nothing on a Go release whose layout this package does
// not know.
func FindFunc(pc uintptr) Func { return Func{} }

// LogicalPCs returns out with pc appended: without the runtime's tables
// there is no inline tree to expand.
func (f Func) LogicalPCs(pc uintptr, out []uintptr) []uintptr { return append(out, pc) }

// genericMethods is moot: nameForPrint is used only to verify mirrors.
const genericMethods = false
