//go:build !amd64 || race || msan || asan

package weft

// FrozenPCs appends to pcs the PCs of c's frames that are frozen in its
// record, innermost first, one per logical frame: none on this build,
// whose portable backend freezes no frames (see the stack-copying version).
func (c *Cont) FrozenPCs(pcs []uintptr) []uintptr { return pcs }

// IsBarrierPC reports whether pc is in the stack-copying backend's return
// barrier: never on this build, which has only the portable backend.
func IsBarrierPC(pc uintptr) bool { return false }
