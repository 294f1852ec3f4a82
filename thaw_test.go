//go:build amd64 && !race && !msan && !asan

package weft

import (
	"go/ast"
	"go/token"
	"io"
	"reflect"
	"runtime"
	"runtime/trace"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/internal/srcfunc"
	"github.com/weftrt/weft/scope"
)

// thawPop copies a record's frames eight words at a time, then four, two
// and one, from the bottom up: the last words copied are the top of the
// record's outermost frame. These bodies yield twice from frames with 5 to
// 12 words of locals (and a heap pointer each, for the pointer table), so
// that the second capture's record, the frames thawed since the first,
// ends with that frame, and the record's length covers every remainder
// modulo 8 (the frames under it, yieldKeepsCaller's and stackYield's, are the same
// in all). Every word of the frame but the two that a thaw rewrites must
// come back as it was, with a collection between the rounds. (Dropping
// the four- or two-word copy fails it; a wrong last word does not, as that
// word is the return address, which the thaw replaces with the barrier's.)
func TestThawCopiesEveryWord(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const rounds = 12
	sizes := map[uintptr]bool{}
	for k, frame := range yieldLocals {
		c := &stackState{}
		bad := 0
		c.body = func() {
			for i := range rounds {
				heap := &capNode{v: i*10 + k}
				capEscape = heap
				if !frame(c, uintptr(i*10+k), heap) {
					bad++
				}
				runtime.GC()
			}
		}
		runToEnd(t, c, 2*rounds+2)
		if bad != 0 {
			t.Errorf("frame %d: %d of %d rounds came back with a wrong word", k, bad, rounds)
		}
		sizes[lastFrameWords%8] = true
	}
	if len(sizes) != 8 {
		t.Errorf("the frames' sizes cover remainders %v modulo 8 words, want all eight", sizes)
	}
}

// yieldKeepsCaller yields and reports whether it did and its caller's frame
// came back as it was, but for its two top words, the return address and
// the saved frame pointer, which a thaw may rewrite (the return barrier;
// the frame pointer chain at the stack's new place). Nothing of the
// caller runs from the copy before the yield to the one after.
//
//go:noinline
func yieldKeepsCaller(c *stackState) bool {
	before := callerFrame()
	if !stackYield(c) {
		return false
	}
	return sameFrame(before, callerFrame())
}

// callerFrame returns a copy of the frame of its caller's caller, but for
// its two top words.
//
//go:noinline
func callerFrame() []uintptr {
	pc, sp := arch.CallerPCSP() // this frame's
	for range 2 {
		d := descFor(pc)
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	words := uintptr(descFor(pc).size) / unsafe.Sizeof(uintptr(0))
	lastFrameWords = words
	return append([]uintptr(nil), unsafe.Slice((*uintptr)(sp), words-2)...)
}

// lastFrameWords is the size in words of the frame callerFrame copied
// last.
var lastFrameWords uintptr

func sameFrame(a, b []uintptr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// yieldLocals yield from frames with 5 to 12 words of locals.
var yieldLocals = []func(*stackState, uintptr, *capNode) bool{
	yieldLocals5, yieldLocals6, yieldLocals7, yieldLocals8, yieldLocals9, yieldLocals10, yieldLocals11, yieldLocals12,
}

//go:noinline
func yieldLocals5(c *stackState, seed uintptr, heap *capNode) bool {
	var a [5]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals6(c *stackState, seed uintptr, heap *capNode) bool {
	var a [6]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals7(c *stackState, seed uintptr, heap *capNode) bool {
	var a [7]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals8(c *stackState, seed uintptr, heap *capNode) bool {
	var a [8]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals9(c *stackState, seed uintptr, heap *capNode) bool {
	var a [9]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals10(c *stackState, seed uintptr, heap *capNode) bool {
	var a [10]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals11(c *stackState, seed uintptr, heap *capNode) bool {
	var a [11]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

//go:noinline
func yieldLocals12(c *stackState, seed uintptr, heap *capNode) bool {
	var a [12]uintptr
	for i := range a {
		a[i] = seed*131 + uintptr(i)
	}
	ok := yieldKeepsCaller(c) && yieldKeepsCaller(c)
	for i := range a {
		ok = ok && a[i] == seed*131+uintptr(i)
	}
	return ok && heap.v == int(seed)
}

// sourceCode prints nodes as Go without comments, white space or
// semicolons, for comparison.
func sourceCode(t *testing.T, fset *token.FileSet, nodes ...ast.Node) string {
	t.Helper()
	c, err := srcfunc.Code(fset, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sourceFunc returns the function or method (as "Type.Method") named name
// in the package file file.
func sourceFunc(t *testing.T, fset *token.FileSet, file, name string) *ast.FuncDecl {
	t.Helper()
	funcs, err := srcfunc.Funcs(fset, file)
	if err != nil {
		t.Fatal(err)
	}
	fd := funcs[name]
	if fd == nil {
		t.Fatalf("%s: no func %s", file, name)
	}
	return fd
}

// TestMountPassMatchesRun checks that stackState.run, which the tests and the
// start-up probe drive, is the same pass as mount's loop runs: the same
// enter or thaw, and the same test that the body returned.
func TestMountPassMatchesRun(t *testing.T) {
	fset := token.NewFileSet()
	mount := sourceFunc(t, fset, "thaw_amd64.go", "Cont.mount")
	run := sourceFunc(t, fset, "thaw_amd64.go", "stackState.run")
	if len(run.Body.List) != 3 {
		t.Fatalf("stackState.run has %d statements; this test knows 3", len(run.Body.List))
	}
	pass := sourceCode(t, fset, run.Body.List[0], run.Body.List[1])
	done := sourceCode(t, fset, run.Body.List[2].(*ast.IfStmt).Cond, run.Body.List[2].(*ast.IfStmt).Body.List[0])
	foundPass, foundDone := false, false
	ast.Inspect(mount.Body, func(n ast.Node) bool {
		b, ok := n.(*ast.BlockStmt)
		if !ok {
			return true
		}
		for i, st := range b.List {
			if i+1 < len(b.List) && sourceCode(t, fset, st, b.List[i+1]) == pass {
				foundPass = true
			}
			if is, ok := st.(*ast.IfStmt); ok && len(is.Body.List) > 0 && sourceCode(t, fset, is.Cond, is.Body.List[0]) == done {
				foundDone = true
			}
		}
		return true
	})
	if !foundPass {
		t.Errorf("mount's loop has no pass matching stackState.run's:\n%s", pass)
	}
	if !foundDone {
		t.Errorf("mount's loop has no end-of-body test matching stackState.run's:\n%s", done)
	}
}

// checkBPChain checks the saved frame pointers of its caller's frame and
// of every bpRecurse frame above it, the ones thawed so far: each must hold
// the address of its caller's saved-BP slot, as the runtime's and
// profilers' frame-pointer unwinders expect.
//
//go:noinline
func checkBPChain(t *testing.T) {
	pc, sp := arch.CallerPCSP() // this frame's
	d := descFor(pc)
	pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
	sp = unsafe.Add(sp, d.size)
	self := descFor(pc).entry // bpRecurse's
	for {
		d := descFor(pc)
		if d.entry != self || !d.hasBP {
			return
		}
		callerPC := *(*uintptr)(unsafe.Add(sp, d.size-8))
		cd := descFor(callerPC) // may move the stack: sp follows
		if cd.entry != self {
			return
		}
		slot := unsafe.Add(sp, uintptr(d.size)-2*wordSize)
		caller := unsafe.Add(sp, d.size)
		if got, want := *(*uintptr)(slot), uintptr(caller)+uintptr(cd.size)-2*wordSize; got != want {
			t.Fatalf("a thawed frame's saved BP is %#x, want its caller's slot %#x (frame SP %p)", got, want, sp)
		}
		bpChainFrames++
		pc, sp = callerPC, caller
	}
}

// bpRecurse yields at depth 0 and checks the frame-pointer chain on its
// way back up, through every record the return barrier thaws.
//
//go:noinline
func bpRecurse(t *testing.T, c *stackState, n int, pad [3]uintptr) uintptr {
	if n == 0 {
		for range 3 {
			if !stackYield(c) {
				panic(c.refusal())
			}
			runtime.GC()
		}
		checkBPChain(t)
		return pad[0]
	}
	pad[n%3] += uintptr(n)
	r := bpRecurse(t, c, n-1, pad) + pad[1]
	checkBPChain(t)
	return r
}

// The saved frame pointers of thawed frames link up as on a stack that was
// never frozen, at every depth, lazy thaw or eager, on a fresh goroutine
// at every resume (the record chains them by word index, not address). It
// drives the stack-copying engine itself, whichever backend the process
// chose.
func TestThawedFramePointers(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	for _, depth := range []int{1, 3, 9, 40} {
		bpChainFrames = 0
		c := &stackState{}
		c.body = func() { bpRecurse(t, c, depth, [3]uintptr{1, 2, 3}) }
		runToEnd(t, c, 10)
		// A check sees the links of the bpRecurse frames thawed above it
		// in its record: at least every other one, with two-frame records.
		if want := (depth + 1) / 2; bpChainFrames < want {
			t.Fatalf("depth %d: %d frame-pointer links checked, want at least %d", depth, bpChainFrames, want)
		}
	}
}

// inlinedInto returns the names of the functions inlined into fn's code:
// the innermost function at each of its PCs, where that is an inlined one.
func inlinedInto(fn any) map[string]bool {
	entry := reflect.ValueOf(fn).Pointer()
	names := make(map[string]bool)
	for pc := entry; ; pc++ {
		if f := runtime.FuncForPC(pc); f == nil || f.Entry() != entry {
			break
		}
		fr, _ := runtime.CallersFrames([]uintptr{pc + 1}).Next() // pc as a return address
		if fr.Func == nil {                                      // an inlined function
			names[fr.Function] = true
		}
	}
	return names
}

// checkInlined fails t unless each of want is inlined into fn: the round
// trip runs in the files docs/architecture.md lists only if they are.
func checkInlined(t *testing.T, name string, fn any, want ...string) {
	t.Helper()
	got := inlinedInto(fn)
	if len(got) == 0 {
		t.Skipf("%s inlines nothing: inlining is off (-gcflags=-l)", name)
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("%s does not inline %s", name, w)
		}
	}
}

// TestMountInlines checks that mount's helpers from other packages are
// inlined into it.
func TestMountInlines(t *testing.T) {
	const gls, rt = "github.com/weftrt/weft/internal/gls.", "github.com/weftrt/weft/internal/rt."
	checkInlined(t, "mount", (*Cont).mount,
		rt+"CurG", rt+"(*G).LockCount", gls+"SlotG", gls+"Slot.Push", gls+"Slot.Pop")
}

// TestResumeFramePointersUnderTracer resumes continuations while the
// collector keeps asking goroutines to stop and the execution tracer
// records each preemption. The tracer walks the frame-pointer chain of a
// goroutine preempted at the host's entry, through arch.Enter. A broken
// saved BP there sends the walk to a wild address, and the process dies.
// The host's stack check spills its Link argument into the frame of its
// caller, Enter, which must have room for it.
func TestResumeFramePointersUnderTracer(t *testing.T) {
	if !useStackCopy {
		t.Skip("the stack-copying backend is not active")
	}
	if trace.IsEnabled() {
		t.Skip("the execution tracer is already on")
	}
	if err := trace.Start(io.Discard); err != nil {
		t.Fatal(err)
	}
	defer trace.Stop()
	stop := make(chan struct{})
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer func() { close(stop); <-gcDone }()
	s := scope.New("tracer")
	body := func() {
		for range 3 {
			Yield(s)
		}
	}
	n := 300_000
	if testing.Short() {
		n = 100_000
	}
	for range n {
		c := NewUncountedCont(s, body)
		for !c.IsDone() {
			c.Run(nil)
		}
	}
}
