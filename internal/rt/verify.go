package rt

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unsafe"
)

// FuncIDGoexit is the runtime's FuncID of runtime.goexit
// (internal/abi.FuncID_goexit), the same in Go 1.25, 1.26 and 1.27.
const FuncIDGoexit = 8

// FuncIDWrapper is the runtime's FuncID of compiler-generated wrappers
// (internal/abi.FuncIDWrapper), the same in Go 1.25, 1.26 and
// 1.27.
const FuncIDWrapper = 23

// Verify checks that the mirrors describe the running program's runtime.
// It looks functions up both through FindFunc and through the runtime's
// public API (runtime.FuncForPC) and compares names and entries, checks the
// module's bounds and text sections, and recognises runtime.goexit by its
// FuncID and flags. It returns nil if every check passes, and otherwise an
// error saying which fact did not hold.
func Verify() error {
	if !Supported {
		return fmt.Errorf("weft/internal/rt: %s on %s: runtime layout not mirrored (known: go1.25, go1.26 and go1.27, not on wasm)", runtime.Version(), runtime.GOARCH)
	}
	var pcs [8]uintptr
	n := runtime.Callers(0, pcs[:]) // runtime.Callers, Verify, and its callers
	probes := append([]uintptr{
		reflect.ValueOf(Verify).Pointer(),
		reflect.ValueOf(runtime.GC).Pointer(),
		reflect.ValueOf(fmt.Sprintf).Pointer(),
	}, pcs[:n]...)
	for _, pc := range probes {
		if err := checkPC(pc); err != nil {
			return err
		}
	}
	// A new goroutine's outermost frame is runtime.goexit.
	top := make(chan uintptr)
	go func() {
		var pcs [64]uintptr
		n := runtime.Callers(0, pcs[:])
		top <- pcs[n-1]
	}()
	pc := <-top
	f := FindFunc(pc - 1)
	if !f.Valid() || f.Name() != "runtime.goexit" {
		return fmt.Errorf("weft/internal/rt: outermost frame of a goroutine is %q, want runtime.goexit", f.Name())
	}
	if f.FuncID() != FuncIDGoexit || f.Flag()&FlagTopFrame == 0 {
		return fmt.Errorf("weft/internal/rt: runtime.goexit has FuncID %d and flags %#x, want FuncID %d and the top-frame flag", f.FuncID(), f.Flag(), FuncIDGoexit)
	}
	// A method value is called through a compiler-generated wrapper.
	w := FindFunc(reflect.ValueOf(verifyRecv{}.method).Pointer())
	if !w.Valid() || !strings.HasSuffix(w.Name(), "-fm") || w.FuncID() != FuncIDWrapper {
		return fmt.Errorf("weft/internal/rt: the method-value wrapper %q has FuncID %d, want %d", w.Name(), w.FuncID(), FuncIDWrapper)
	}
	errc := make(chan error)
	go func() { errc <- verifyG() }() // on a goroutine with no defers of its own
	return <-errc
}

type verifyRecv struct{}

func (verifyRecv) method() {}

// verifyG checks the mirror of g against what a goroutine can observe of
// itself: its locals lie within its stack bounds, which follow the stack
// when it grows; a defer record is linked while a non-open-coded defer is
// pending and only then; a panic record while a panic runs and only then.
func verifyG() error {
	g := CurG()
	var local byte
	lo, hi, at := g.StackLo, g.StackHi, uintptr(unsafe.Pointer(&local))
	if !(lo < at && at < hi) || (hi-lo)&(hi-lo-1) != 0 || hi-lo < 2048 {
		return fmt.Errorf("weft/internal/rt: g's stack [%#x, %#x) does not hold a local at %#x", lo, hi, at)
	}
	if err := growAndCheck(g, 64<<10); err != nil {
		return err
	}
	if g.Defer != nil || g.Panic != nil {
		return fmt.Errorf("weft/internal/rt: a goroutine without defers or panics has g._defer %p, g._panic %p", g.Defer, g.Panic)
	}
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
	var inPanic unsafe.Pointer
	func() {
		defer func() {
			inPanic = g.Panic
			recover()
		}()
		panic("weft self-check")
	}()
	if inPanic == nil || g.Panic != nil {
		return fmt.Errorf("weft/internal/rt: g._panic is %p during a panic and %p after it", inPanic, g.Panic)
	}
	return nil
}

// growAndCheck recurses until the stack has grown to at least n bytes and
// checks, in the deepest frame, that g's bounds hold that frame's locals.
//
//go:noinline
func growAndCheck(g *G, n int) error {
	var pad [1024]byte
	at := uintptr(unsafe.Pointer(&pad[0]))
	if n <= 0 {
		if !(g.StackLo <= at && at < g.StackHi) || g.StackHi-g.StackLo < 64<<10 {
			return fmt.Errorf("weft/internal/rt: after growth, g's stack [%#x, %#x) does not hold a local at %#x", g.StackLo, g.StackHi, at)
		}
		return nil
	}
	return growAndCheck(g, n-len(pad)+int(pad[n%len(pad)]))
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

// checkPC compares what FindFunc and runtime.FuncForPC say of pc.
func checkPC(pc uintptr) error {
	rf := runtime.FuncForPC(pc)
	if rf == nil {
		return fmt.Errorf("weft/internal/rt: probe %#x is not in a Go function", pc)
	}
	f := FindFunc(pc)
	switch {
	case !f.Valid():
		return fmt.Errorf("weft/internal/rt: findfunc(%#x) found nothing; runtime.FuncForPC found %s", pc, rf.Name())
	case f.Entry() != rf.Entry():
		return fmt.Errorf("weft/internal/rt: %s starts at %#x, runtime says %#x", rf.Name(), f.Entry(), rf.Entry())
	case len(f.datap.textsectmap) > 1:
		return errors.New("weft/internal/rt: the module has several text sections, which weft does not handle")
	case len(f.datap.textsectmap) == 1 && f.datap.textsectmap[0].baseaddr != f.datap.text:
		// textsectmap follows gofunc (Go 1.25) or epclntab (1.26, 1.27): a
		// wrong mirror reads it from the wrong place.
		return fmt.Errorf("weft/internal/rt: the text section starts at %#x, the module's text at %#x", f.datap.textsectmap[0].baseaddr, f.datap.text)
	case pc < f.datap.minpc || pc >= f.datap.maxpc || f.Entry() < f.datap.text || f.Entry() >= f.datap.etext:
		return fmt.Errorf("weft/internal/rt: %s at %#x lies outside its module's bounds", rf.Name(), pc)
	case f.SPDelta(f.Entry()) != 0:
		return fmt.Errorf("weft/internal/rt: %s has SP delta %d at its entry, want 0", rf.Name(), f.SPDelta(f.Entry()))
	}
	return checkName(f, pc, rf.Name())
}

// checkName compares the name of f with the name the runtime reports for
// pc. runtime.FuncForPC names the innermost function inlined at pc, so the
// names must agree exactly where pc is in no inlined body (its inline tree
// index is negative).
func checkName(f Func, pc uintptr, runtimeName string) error {
	if f.PCData(PCDATAInlTreeIndex, pc) >= 0 {
		return nil
	}
	if nameForPrint(f.Name()) != runtimeName {
		return fmt.Errorf("weft/internal/rt: function at %#x is named %q, runtime says %q", pc, f.Name(), runtimeName)
	}
	return nil
}

// nameForPrint is the name runtime.Func.Name reports for a symbol name: the
// type arguments of a generic function are elided as "[...]", and from Go
// 1.27, which has generic methods, those of a generic method of a generic
// type too ("T[...].M[...]"), as runtime.funcNamePiecesForPrint does.
func nameForPrint(name string) string {
	i := strings.IndexByte(name, '[')
	if i < 0 {
		return name
	}
	j := strings.LastIndexByte(name, ']')
	if j <= i {
		return name
	}
	interior := name[i+1 : j]
	if !genericMethods || strings.IndexByte(interior, '[') < 0 {
		return name[:i] + "[...]" + name[j+1:]
	}
	// The interior is "A]B[C" for the type's arguments A, the method's
	// name B and its arguments C, if a "]" closes the first "[" at depth
	// zero and a "[" opens again right after; else a single list whose
	// brackets balance ("[]int"). Anything else is malformed, and printed
	// whole.
	depth, rbr, lbr := 1, -1, -1
	for k, c := range interior {
		if c == '[' {
			depth++
			if depth == 1 {
				lbr = k
				break
			}
		} else if c == ']' {
			depth--
			if depth < 0 {
				break
			}
			if depth == 0 {
				rbr = k
			}
		}
	}
	switch {
	case depth == 1 && rbr >= 0 && lbr > rbr:
		return name[:i] + "[...]" + interior[rbr+1:lbr] + "[...]" + name[j+1:]
	case depth == 1 && rbr < 0 && lbr < 0:
		return name[:i] + "[...]" + name[j+1:]
	}
	return name
}
