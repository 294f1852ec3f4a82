//go:build go1.25 && !go1.28

package rt

// CurLockCount is LockCount after InitLockCount, for the yield and mount
// paths: it reads 0 if the field was not found. Every mount and every
// yield asks it, so on amd64 it is in assembly (curlock_amd64.s): lockCountOf
// with the g from thread-local storage, where Go code needs a call to
// arch.GPointer inside a call of its own.
func CurLockCount() uint32
