//go:build linux && amd64 && !race && go1.26 && !go1.27

package gls

// wordOffset is the offset of runtime.g.racectx in Go 1.26.
const wordOffset = 312
