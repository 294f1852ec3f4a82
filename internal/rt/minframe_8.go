//go:build !(386 || amd64 || wasm || arm || mips || mipsle || ppc64 || ppc64le)

package rt

// minFrameSize is the size of the system-reserved words at the bottom of
// every frame (internal/goarch.MinFrameSize).
const minFrameSize = 8
