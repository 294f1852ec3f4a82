//go:build amd64

// Package asmtest calls Go back from hand-written assembly, so that tests
// can put a frame without stack maps (an assembly frame) between a yield
// and the entry of the continuation it would suspend.
package asmtest

// CallGo calls f from an assembly function with a frame of its own: while
// f runs, CallGo's frame lies between f and CallGo's caller. On amd64 it is
// implemented in call_amd64.s.
func CallGo(f func())
