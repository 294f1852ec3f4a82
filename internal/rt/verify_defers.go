//go:build go1.25 && !go1.28 && !wasm

package rt

import (
	"errors"
	"fmt"
	"unsafe"
)

// verifyDefers checks the defer-record mirror (Defer) against records g
// makes of itself: heap records (a defer in a loop), stack records (nine
// defers) and a range-over-func record, and that none stays linked once
// their frames have returned.
func verifyDefers(g *G) error {
	if err := deferRecordVisible(g); err != nil {
		return err
	}
	if g.Defer != nil {
		return errors.New("weft/internal/rt: g._defer still set after the deferring function returned")
	}
	if err := deferStackRecords(g); err != nil {
		return err
	}
	if err := deferRangeFuncRecord(g); err != nil {
		return err
	}
	if g.Defer != nil {
		return errors.New("weft/internal/rt: g._defer still set after the deferring functions returned")
	}
	return nil
}

// deferRecordVisible runs a defer in a loop, which the compiler cannot
// open-code, and checks the heap records g links meanwhile: every field
// the engine reads or writes (checkRecords).
//
//go:noinline
func deferRecordVisible(g *G) error {
	n := 0
	var local byte
	fns := [2]func(){func() { n++ }, func() { n += 2 }}
	for i := 0; i < 2; i++ {
		defer fns[i]()
	}
	return checkRecords(g, "a defer in a loop", true, uintptr(unsafe.Pointer(&local)), fns[1], fns[0])
}

// deferStackRecords has nine deferred calls, more than the compiler
// open-codes: records on the stack, in this frame.
//
//go:noinline
func deferStackRecords(g *G) error {
	n := 0
	var local byte
	f1, f2 := func() { n++ }, func() { n += 2 }
	defer f1()
	defer f2()
	defer f1()
	defer f2()
	defer f1()
	defer f2()
	defer f1()
	defer f2()
	defer f1()
	return checkRecords(g, "nine defers", false, uintptr(unsafe.Pointer(&local)), f1, f2, f1, f2, f1, f2, f1, f2, f1)
}

// checkRecords checks g's defer chain, innermost first, against the calls
// the frame holding local deferred, newest first (fns): the chain has
// exactly those records, each with that call (fn), heap set as given,
// rangefunc and head clear, its frame's SP (sp: at or below local, above
// any callee's frame), and for a stack record an address within the stack,
// above that SP. The last record's link is nil.
func checkRecords(g *G, what string, heap bool, local uintptr, fns ...func()) error {
	below := calleeLocal()
	d := (*Defer)(g.Defer)
	for i, f := range fns {
		if d == nil {
			return fmt.Errorf("weft/internal/rt: %s: %d defer records linked from g, want %d", what, i, len(fns))
		}
		at := uintptr(unsafe.Pointer(d))
		switch {
		case d.Heap != heap || d.Rangefunc || d.Head != nil:
			return fmt.Errorf("weft/internal/rt: %s: record %d has heap %v, rangefunc %v, head %p; want heap %v", what, i, d.Heap, d.Rangefunc, d.Head, heap)
		case d.SP > local || d.SP <= below || d.SP < g.StackLo:
			return fmt.Errorf("weft/internal/rt: %s: record %d has frame SP %#x, not the deferring frame's (local at %#x, a callee's at %#x)", what, i, d.SP, local, below)
		case !heap && (at < d.SP || at >= g.StackHi):
			return fmt.Errorf("weft/internal/rt: %s: stack record %d at %#x is not in its frame above SP %#x", what, i, at, d.SP)
		case deferredPC(d.Fn) != deferredPC(f):
			return fmt.Errorf("weft/internal/rt: %s: record %d calls %#x, want the deferred %#x", what, i, deferredPC(d.Fn), deferredPC(f))
		}
		d = d.Link
	}
	if d != nil {
		return fmt.Errorf("weft/internal/rt: %s: more than %d defer records linked from g", what, len(fns))
	}
	return nil
}

// deferRangeFuncRecord defers a call in a range-over-func loop body: the
// runtime links a heap record of this frame with rangefunc and head set.
//
//go:noinline
func deferRangeFuncRecord(g *G) error {
	var err error
	for range func(body func() bool) { body() } {
		defer func() {}()
		d := (*Defer)(g.Defer)
		if d == nil || !d.Rangefunc || d.Head == nil || !d.Heap {
			err = errors.New("weft/internal/rt: a range-over-func loop's defer record is not a heap record with rangefunc and head set")
		}
	}
	return err
}

// calleeLocal returns the address of a local of a callee's frame: below
// its caller's SP.
//
//go:noinline
func calleeLocal() uintptr {
	var b byte
	return uintptr(unsafe.Pointer(&b))
}

// deferredPC returns the code pointer of a func value.
func deferredPC(f func()) uintptr {
	if f == nil {
		return 0
	}
	return **(**uintptr)(unsafe.Pointer(&f))
}
