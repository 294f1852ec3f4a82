//go:build !amd64

// Package asmtest calls Go back from hand-written assembly, so that tests
// can put a frame without stack maps (an assembly frame) between a yield
// and the entry of the continuation it would suspend.
package asmtest

// CallGo calls f. On amd64 it does so from an assembly function; on other
// architectures, which have no assembly version, it is plain Go, so no
// assembly frame lies between f and CallGo's caller.
func CallGo(f func()) { f() }
