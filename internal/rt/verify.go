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
	if err := verifyDefers(g); err != nil {
		return err
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
