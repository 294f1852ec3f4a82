//go:build go1.25 && !go1.28 && !wasm && !amd64

package rt

import "github.com/weftrt/weft/arch"

// CurLockCount is LockCount after InitLockCount, for the yield and mount
// paths: it reads 0 if the field was not found.
func CurLockCount() uint32 { return lockCountOf(arch.GPointer()) }
