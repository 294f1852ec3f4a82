//go:build 386 || amd64 || arm || arm64 || loong64 || mips || mipsle || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x

package arch

// HasG reports whether G reads the runtime g pointer directly (fast) rather
// than parsing the goroutine id from a stack dump (slow).
const HasG = true

// getg returns the address of the calling goroutine's runtime g.
// Implemented in g_$GOARCH.s.
//
//go:noescape
func getg() uintptr
