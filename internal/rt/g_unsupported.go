//go:build !go1.25 || go1.28 || wasm

package rt

import (
	"errors"
	"unsafe"
)

// G is not mirrored for this Go release or architecture.
type G struct {
	StackLo, StackHi uintptr
	Panic, Defer     unsafe.Pointer
}

// CurG returns nil: the layout of g is not mirrored here.
func CurG() *G { return nil }

// DeferOffsets finds no records: the layout of g is not mirrored here.
func (g *G) DeferOffsets(yield func(off uintptr) bool) {}

// Locked cannot tell: the layout of g is not mirrored here.
func Locked() (locked, ok bool) { return false, false }

// LockCount cannot tell: the layout of g is not mirrored here.
func LockCount() (n uint32, ok bool) { return 0, false }

// InitLockCount does nothing: the layout of g is not mirrored here.
func InitLockCount() {}

// CurLockCount reads 0: the layout of g is not mirrored here.
func CurLockCount() uint32 { return 0 }

// LockCount reads 0: the layout of g is not mirrored here.
func (g *G) LockCount() uint32 { return 0 }

// verifyDefers fails: the layout of runtime._defer is not mirrored here.
func verifyDefers(*G) error {
	return errors.New("weft/internal/rt: runtime._defer is not mirrored for this Go release or architecture")
}
