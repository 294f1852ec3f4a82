//go:build 386 || amd64 || wasm

package rt

// pcQuantum is the minimal instruction size (internal/goarch.PCQuantum).
const pcQuantum = 1
