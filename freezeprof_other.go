//go:build !amd64 || race || msan || asan

package weft

// logicalPCs returns a record's stack as runtime.Callers gives it, which
// is how the portable backend, the only one of this build, records it.
func logicalPCs(pcs []uintptr) []uintptr { return append([]uintptr(nil), pcs...) }
