//go:build linux && amd64 && !race && go1.25 && !go1.26

package gls

// wordOffset is the offset of runtime.g.racectx in Go 1.25.
const wordOffset = 304
