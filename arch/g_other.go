//go:build !(386 || amd64 || arm || arm64 || loong64 || mips || mipsle || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package arch

import (
	"runtime"
	"strconv"
)

// HasG reports whether G reads the runtime g pointer directly (fast) rather
// than parsing the goroutine id from a stack dump (slow).
const HasG = false

// getg returns the goroutine id, parsed from the first line of
// runtime.Stack ("goroutine 42 [running]:").
func getg() uintptr {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	b := buf[:n]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		panic("weft/arch: unexpected runtime.Stack header")
	}
	b = b[len(prefix):]
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	id, err := strconv.ParseUint(string(b[:i]), 10, 64)
	if err != nil {
		panic("weft/arch: cannot parse goroutine id: " + err.Error())
	}
	return uintptr(id)
}
