//go:build cgo

// Package cgotest calls Go back from C, so that tests can look at a
// goroutine stack with a cgo callback on it.
package cgotest

/*
extern void weftCgotestCallback(void);
static void weftCgotestCall(void) { weftCgotestCallback(); }
*/
import "C"

var callback func()

// CallFromC calls f from C code called from Go: f runs in a cgo callback.
// Not safe for concurrent use.
func CallFromC(f func()) {
	callback = f
	C.weftCgotestCall()
}

//export weftCgotestCallback
func weftCgotestCallback() { callback() }
