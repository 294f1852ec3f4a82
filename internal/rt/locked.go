//go:build go1.25 && !go1.28 && !wasm

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

// gScanBytes bounds the search to runtime.g itself, 440 bytes in Go 1.25
// and 456 in 1.26 and 1.27 (lockedm is at byte 208 in all three): reading past the
// object would read another allocation's memory, which checkptr rightly
// rejects.
const gScanBytes = 440 - gMOffset

// lockedmOffset finds runtime.g.lockedm the way a debugger would: on a
// fresh goroutine, the one word of its g that holds the goroutine's m while
// it is locked to its thread, and zero before and after, twice over. It is
// 0 if there is no such word, or more than one.
var lockedmOffset = sync.OnceValue(func() uintptr {
	return probe(func() uintptr {
		g := arch.GPointer()
		word := func(off uintptr) uintptr { return *(*uintptr)(unsafe.Add(g, off)) }
		var before, during, after [gScanBytes / 8]uintptr
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
		return only(len(during), func(i int) bool {
			// 0 is g.m itself
			return i > 0 && m != 0 && before[i] == 0 && during[i] == m && after[i] == 0
		}, func(i int) uintptr { return gMOffset + uintptr(i)*8 })
	})
})

// probe runs round twice on a fresh goroutine, and returns the offset
// both rounds found: 0 if either found none or more than one (^0), or if
// they disagree.
func probe(round func() uintptr) uintptr {
	found := make(chan uintptr)
	go func() {
		a, b := round(), round()
		if a == ^uintptr(0) || a != b {
			a = 0
		}
		found <- a
	}()
	return <-found
}

// only returns off(i) for the one i in [0, n) that match holds for: 0 if
// there is none, ^0 if there are several.
func only(n int, match func(i int) bool, off func(i int) uintptr) uintptr {
	hit := uintptr(0)
	for i := range n {
		if match(i) {
			if hit != 0 {
				return ^uintptr(0)
			}
			hit = off(i)
		}
	}
	return hit
}

// LockCount returns how many runtime.LockOSThread calls the thread the
// calling goroutine runs on has outstanding (runtime.m.lockedExt): a
// continuation body that changes it between its Run and a yield has locked
// (or unlocked) the thread, and cannot be resumed on another goroutine. ok
// is false if the field was not found in this runtime's m.
func LockCount() (n uint32, ok bool) {
	InitLockCount()
	if lockedExtOff == 0 {
		return 0, false
	}
	return lockCountOf(arch.GPointer()), true
}

// lockedExtOff is the offset of runtime.m.lockedExt, or 0 until
// InitLockCount has found it (and if it could not).
var lockedExtOff uintptr

// initLockCount guards the one write of lockedExtOff: goroutines read it
// on every yield and mount, with no lock.
var initLockCount sync.Once

// InitLockCount finds runtime.m.lockedExt, once; CurLockCount reads 0
// until it has. Later calls do nothing.
func InitLockCount() {
	initLockCount.Do(func() { lockedExtOff = lockedExtOffset() })
}

// CurLockCount is LockCount after InitLockCount, for the yield and mount
// paths: it reads 0 if the field was not found.
func CurLockCount() uint32 { return lockCountOf(arch.GPointer()) }

// LockCount is CurLockCount for g, the calling goroutine's g: for a
// caller that has g already.
func (g *G) LockCount() uint32 { return lockCountOf(unsafe.Pointer(g)) }

// lockCountOf is CurLockCount for g, the calling goroutine's runtime.g.
func lockCountOf(g unsafe.Pointer) uint32 {
	off := lockedExtOff
	if off == 0 {
		return 0
	}
	for {
		// An unlocked goroutine may move to another thread between the
		// loads of g.m and of the count; then g.m changes.
		m := *(*unsafe.Pointer)(unsafe.Add(g, gMOffset))
		n := *(*uint32)(unsafe.Add(m, off))
		if *(*unsafe.Pointer)(unsafe.Add(g, gMOffset)) == m {
			return n
		}
	}
}

// mScanBytes bounds the search in runtime.m, 1,816 bytes in Go 1.25,
// 1,824 in 1.26 and 1,832 in 1.27, with lockedExt at byte 624, 648 and
// 648 (TestMirrorsMatchDWARF checks both bounds).
const mScanBytes = 1024

// lockedExtOffset finds runtime.m.lockedExt on a fresh goroutine locked
// to its thread: the one uint32 of its m that counts LockOSThread calls,
// 1 (the probe's own lock), 2, 3, then 1 again as two are undone, twice
// over. It is 0 if there is no such word, or more than one.
var lockedExtOffset = sync.OnceValue(func() uintptr {
	return probe(func() uintptr {
		runtime.LockOSThread() // the m must not change between snapshots
		defer runtime.UnlockOSThread()
		m := *(*unsafe.Pointer)(unsafe.Add(arch.GPointer(), gMOffset))
		var snaps [4][mScanBytes / 4]uint32
		take := func(k int) {
			for i := range snaps[k] {
				snaps[k][i] = *(*uint32)(unsafe.Add(m, uintptr(i)*4))
			}
		}
		take(0) // one lock held: the probe's own
		runtime.LockOSThread()
		take(1)
		runtime.LockOSThread()
		take(2)
		runtime.UnlockOSThread()
		runtime.UnlockOSThread()
		take(3)
		return only(len(snaps[0]), func(i int) bool {
			return snaps[0][i] == 1 && snaps[1][i] == 2 && snaps[2][i] == 3 && snaps[3][i] == 1
		}, func(i int) uintptr { return uintptr(i) * 4 })
	})
})
