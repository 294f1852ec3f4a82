//go:build linux && amd64 && !race && go1.27 && !go1.28

package gls

// wordOffset is the offset of runtime.g.racectx in Go 1.27.
const wordOffset = 312
