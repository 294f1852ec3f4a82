//go:build arm || mips || mipsle

package rt

// minFrameSize is the size of the system-reserved words at the bottom of
// every frame (internal/goarch.MinFrameSize).
const minFrameSize = 4
