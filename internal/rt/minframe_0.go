//go:build 386 || amd64 || wasm

package rt

// minFrameSize is the size of the system-reserved words at the bottom of
// every frame (internal/goarch.MinFrameSize).
const minFrameSize = 0
