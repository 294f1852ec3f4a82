// Package pinning names the reasons a continuation cannot be suspended, and
// provides Do, a critical section in which it must not be.
//
// As in Project Loom, pinning is a property of the frames between a yield
// point and the continuation's entry: a frame that cannot be moved (a cgo
// or runtime frame, assembly without stack maps, a reflect.MakeFunc or
// method-value stub, a frame that a panic record or a range-over-func
// defer record points into) pins the continuation, and
// so does a critical section entered with Do. A pinned Yield calls the
// continuation's onPinned handler (continuation.WithOnPinned) and, if the
// handler returns, returns false: the continuation keeps running where it
// is and nothing is lost.
//
// Which reasons can occur depends on the backend. The portable backend
// (a goroutine per continuation) can suspend through any frame, so the
// reasons it reports are CriticalSection, LockedThread (the body locked its
// thread since it was last run) and NativeFrame (a yield inside a cgo
// callback). The stack-copying backend reports all of them.
package pinning

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/weftrt/weft/internal/gls"
)

// Reason says why a continuation could not be suspended.
type Reason uint8

// The pinning reasons.
const (
	// CriticalSection: the yield happened inside Do.
	CriticalSection Reason = iota + 1
	// NativeFrame: a cgo frame (C code, or a Go callback from C) lies
	// between the yield point and the continuation's entry.
	NativeFrame
	// RuntimeFrame: a Go runtime frame lies in the region (for example a
	// yield from inside a finalizer or a runtime callback), or a call that
	// keeps a mode in the goroutine until it returns: runtime/secret.Do,
	// crypto/fips140.WithoutEnforcement.
	RuntimeFrame
	// AssemblyFrame: a frame without stack maps (hand-written assembly)
	// lies in the region, so its pointers cannot be found.
	AssemblyFrame
	// ReflectFrame: the stub of a reflect.MakeFunc function or of a method
	// value (reflect.Value.Method(i).Interface()) lies in the region. Its
	// argument map is known only at run time. A yield under
	// reflect.Value.Call, CallSlice or Method(i).Call does not pin.
	ReflectFrame
	// DeferRecord: a frame in the region has a defer record the
	// stack-copying backend cannot move: a defer in the body of a
	// range-over-func loop (such as for v := range seq), whose record
	// the runtime shares with the loop's iterator. Other defer records
	// (a defer in a loop, a function with many defers or returns, such as
	// fmt's calls of String and Error methods) move with their frames.
	DeferRecord
	// PanicRecord: a panic is in progress in the region (the yield is in a
	// deferred call run by a panic).
	PanicRecord
	// StackPointer: a frame in the region holds a pointer to stack memory
	// outside the continuation, which would dangle once frozen.
	StackPointer
	// UnknownFrame: the unwinder cannot describe a frame in the region.
	UnknownFrame
	// LockedThread: the continuation locked its goroutine to its OS
	// thread with runtime.LockOSThread since it was last run (or undid a
	// lock taken before), and has not undone it: resumed on another
	// goroutine, it would run on another thread.
	LockedThread
)

var reasonNames = [...]string{
	CriticalSection: "critical section (pinning.Do)",
	NativeFrame:     "native (cgo) frame",
	RuntimeFrame:    "runtime frame",
	AssemblyFrame:   "assembly frame without stack maps",
	ReflectFrame:    "reflect call frame",
	DeferRecord:     "defer record",
	PanicRecord:     "panic in progress",
	StackPointer:    "pointer to stack memory outside the continuation",
	UnknownFrame:    "frame the unwinder cannot describe",
	LockedThread:    "thread locked (runtime.LockOSThread)",
}

// String returns a short description of the reason.
func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("pinning.Reason(%d)", uint8(r))
}

// Reasons returns every reason, in order. Useful for counters indexed by
// reason.
func Reasons() []Reason {
	rs := make([]Reason, 0, len(reasonNames)-1)
	for r := CriticalSection; int(r) < len(reasonNames); r++ {
		rs = append(rs, r)
	}
	return rs
}

// ErrPinned is the sentinel every *Error matches with errors.Is.
var ErrPinned = errors.New("continuation pinned")

// Error describes a pinned yield. The default onPinned handler panics with
// an *Error.
type Error struct {
	// Reason says why the continuation could not be suspended.
	Reason Reason
	// Scope is the name of the scope the yield named.
	Scope string
	// Frame is the frame that pinned the continuation: for CriticalSection,
	// the caller of Do; for DeferRecord, the function whose frame has the
	// record (not a function inlined into it, whose call was under way).
	// It is zero when unknown.
	Frame runtime.Frame
}

// Error describes the pinned yield and how to avoid it.
func (e *Error) Error() string {
	where := ""
	if e.Frame.Function != "" {
		where = fmt.Sprintf(" at %s (%s:%d)", e.Frame.Function, e.Frame.File, e.Frame.Line)
	}
	return fmt.Sprintf("weft: yield to scope %q %v: %v%s; the continuation cannot be suspended here "+
		"(move the yield out of that frame, or install a handler with continuation.WithOnPinned)",
		e.Scope, ErrPinned, e.Reason, where)
}

// Is reports whether target is ErrPinned.
func (e *Error) Is(target error) bool { return target == ErrPinned }

// Do calls f as a critical section: a yield from f (or from anything f
// calls) to a continuation that was mounted when Do was called is pinned,
// and does not suspend. Yields to continuations mounted inside f are not
// affected, since Do's frame is not part of what they would suspend.
//
// Do is cheap outside continuations, and nests.
//
//go:noinline
func Do(f func()) {
	l := gls.Current()
	if l == nil {
		f()
		return
	}
	var pc [1]uintptr
	runtime.Callers(2, pc[:])
	l.EnterCritical(pc[0])
	defer l.ExitCritical()
	f()
}
