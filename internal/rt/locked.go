//go:build go1.25 && !go1.27 && !wasm

package rt

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// Locked reports whether the calling goroutine is locked to its OS thread:
// by runtime.LockOSThread, or because it is running a Go callback from C.
// ok is false if the field that says so (runtime.g.lockedm) was not found
// in this runtime's g.
func Locked() (locked, ok bool) {
	off := lockedmOffset()
	if off == 0 {
		return false, false
	}
	return *(*uintptr)(unsafe.Add(arch.GPointer(), off)) != 0, true
}

// gMOffset is the offset of runtime.g.m, right after the prefix G mirrors.
const gMOffset = unsafe.Sizeof(G{})

// gScanBytes bounds the search to runtime.g itself, 456 bytes in Go 1.25
// and 1.26 (lockedm is at byte 208): reading past the object would read
// another allocation's memory, which checkptr rightly rejects.
const gScanBytes = 456 - gMOffset

// lockedmOffset finds runtime.g.lockedm the way a debugger would: on a
// fresh goroutine, the one word of its g that holds the goroutine's m while
// it is locked to its thread, and zero before and after, twice over. It is
// 0 if there is no such word, or more than one.
var lockedmOffset = sync.OnceValue(func() uintptr {
	found := make(chan uintptr)
	go func() {
		g := arch.GPointer()
		word := func(off uintptr) uintptr { return *(*uintptr)(unsafe.Add(g, off)) }
		var before, during, after [gScanBytes / 8]uintptr
		candidate := uintptr(0)
		for round := 0; round < 2; round++ {
			for i := range before {
				before[i] = word(gMOffset + uintptr(i)*8)
			}
			runtime.LockOSThread()
			m := word(gMOffset) // fixed while locked
			for i := range during {
				during[i] = word(gMOffset + uintptr(i)*8)
			}
			runtime.UnlockOSThread()
			for i := range after {
				after[i] = word(gMOffset + uintptr(i)*8)
			}
			hit := uintptr(0)
			for i := 1; i < len(during); i++ { // 0 is g.m itself
				if m != 0 && before[i] == 0 && during[i] == m && after[i] == 0 {
					if hit != 0 {
						hit = ^uintptr(0) // ambiguous
						break
					}
					hit = gMOffset + uintptr(i)*8
				}
			}
			if hit == 0 || hit == ^uintptr(0) || (candidate != 0 && hit != candidate) {
				found <- 0
				return
			}
			candidate = hit
		}
		found <- candidate
	}()
	return <-found
})
