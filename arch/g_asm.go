//go:build 386 || amd64 || arm || arm64 || loong64 || mips || mipsle || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x

package arch

import "unsafe"

// HasG reports whether G reads the runtime g pointer directly (fast) rather
// than parsing the goroutine id from a stack dump (slow).
const HasG = true

// GPointer returns the calling goroutine's runtime g. Only architectures
// with assembly for it (HasG) have it.
func GPointer() unsafe.Pointer { return getgp() }

// getg returns the address of the calling goroutine's runtime g.
func getg() uintptr { return uintptr(getgp()) }

// getgp is implemented in g_$GOARCH.s (g_amd64.s holds CallerPCSP too).
//
//go:noescape
func getgp() unsafe.Pointer
