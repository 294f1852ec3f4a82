//go:build linux && amd64 && !race && go1.25 && !go1.28

package gls

import (
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// The word is runtime.g.racectx, the race detector's context for the
// goroutine. Every statement of the runtime that reads or writes it is
// under its raceenabled constant (runtime/proc.go, time.go, trace.go,
// mcleanup.go, and race_amd64.s, built only with -race), but one: at
// start-up runtime.main zeroes it in m0's g0, where no Go code of a user
// runs. So in a build without -race the runtime leaves the word zero for
// a goroutine's whole life, and never clears it either: a g whose
// goroutine ended is reused by a later goroutine with the word as it was
// left. Hence the rules its writers keep:
//
//   - The stack-copying backend's Push and Pop are paired by a deferred
//     call, which runs on a return, a panic or runtime.Goexit alike: the
//     word holds a record only while its continuation is mounted, and the
//     frames that mounted it hold the continuation meanwhile.
//   - The portable backend binds a body goroutine, new and so with a zero
//     word, for the goroutine's whole life, suspended or not, and unbinds
//     it (back to zero) in a deferred call: the goroutine's own stack holds
//     the continuation meanwhile.
//
// The word is a uintptr to the collector, which does not see the record
// through it: those frames are what keep the record alive.
//
// TestWordOffset checks wordOffset against the runtime's DWARF type
// information for each release this file builds for, and
// TestWordUntouched that the runtime leaves a record in place through
// what a goroutine goes through. The check at start-up (wordOK) catches a
// word that the runtime does use, or an offset that lands on a field that
// is not zero on the main goroutine; an offset that landed on one that is
// would go unnoticed but for those tests, which is why the offsets are
// per release, as internal/rt's layouts are.

// wordOK reports whether records are kept in the goroutines' words: the
// word of the goroutine that initialises this package is zero, as the
// runtime leaves it (a -race build's runtime sets it on every goroutine).
// It is decided before anything can be bound, and never changes.
var wordOK = *word() == 0

// word returns the address of the calling goroutine's word.
func word() *uintptr { return (*uintptr)(unsafe.Add(arch.GPointer(), wordOffset)) }

// wordOfG returns the address of the word of goroutine g, an arch.G value:
// the address of its runtime.g, which the runtime never frees.
func wordOfG(g uintptr) *uintptr {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&g)) // g is a runtime.g's address
	return (*uintptr)(unsafe.Add(p, wordOffset))
}

// Current returns the calling goroutine's record, or nil. It is
// CurrentG(arch.GPointer()) in one call of assembly (current_linux_amd64.s):
// the scheduler asks it on every switch, and in Go it is two calls.
func Current() *Local
