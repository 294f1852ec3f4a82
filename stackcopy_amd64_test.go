//go:build amd64 && !race && !msan && !asan

package weft

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/internal/thawstat"
	"github.com/weftrt/weft/scope"
)

// A body frozen at each yield and thawed on a new goroutine every time:
// locals, pointers to heap objects and to its own stack locals, and a
// pointer to an address-taken array must all come back.
func TestStackCopyRoundTrip(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	c := &stackState{}
	var trace []string
	c.body = func() {
		x := 10
		p := &x // a pointer to this frame's own local
		h := &capNode{v: 5}
		var arr [2]*capNode
		arr[0] = h
		q := &arr
		for i := 0; i < 5; i++ {
			if !stackYield(c) {
				trace = append(trace, "pinned: "+c.refusal().Error())
				return
			}
			*p += i
			runtime.GC()
			trace = append(trace, fmt.Sprint(x, h.v, q[0].v, len(trace)))
		}
	}
	for i := 0; !c.done; i++ {
		if i > 10 {
			t.Fatal("the body did not finish")
		}
		done := make(chan struct{})
		go func() { // a fresh goroutine for every run
			defer close(done)
			c.run()
		}()
		<-done
		runtime.GC()
	}
	want := []string{"10 5 5 0", "11 5 5 1", "13 5 5 2", "16 5 5 3", "20 5 5 4"}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace %q, want %q", trace, want)
	}
}

// scDeep recurses depth frames with a local in each that stays live across
// the yields at the bottom, and checks every local on the way up.
//
//go:noinline
func scDeep(c *stackState, depth, yields int, sum *int) bool {
	local := depth*7 + 1
	node := &capNode{v: depth}
	if depth == 0 {
		for i := 0; i < yields; i++ {
			if !stackYield(c) {
				return false
			}
			arch.GrowStack(uintptr(i%4) * 16 << 10) // grow the stack after a thaw
		}
		*sum += local
		return true
	}
	ok := scDeep(c, depth-1, yields, sum)
	if local != depth*7+1 || node.v != depth {
		panic(fmt.Sprintf("frame %d: local %d node %d after thaw", depth, local, node.v))
	}
	*sum += local
	return ok
}

func runToEnd(t *testing.T, c *stackState, max int) {
	t.Helper()
	for i := 0; !c.done; i++ {
		if i > max {
			t.Fatal("the body did not finish")
		}
		done := make(chan struct{})
		go func() { defer close(done); c.run() }()
		<-done
		if c.refusal() != nil {
			t.Fatal(c.refusal())
		}
	}
}

// Deep stacks: capture grows its own goroutine's stack while it walks 300
// frames, and the thawed frames must survive further growth and collection.
func TestStackCopyDeep(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	for _, depth := range []int{1, 50, 300} {
		c := &stackState{}
		sum := 0
		ok := true
		c.body = func() { ok = scDeep(c, depth, 20, &sum) }
		runToEnd(t, c, 25)
		want := 0
		for d := 0; d <= depth; d++ {
			want += d*7 + 1
		}
		if !ok || sum != want {
			t.Fatalf("depth %d: ok %v, sum %d, want %d", depth, ok, sum, want)
		}
	}
}

// Many goroutines freezing and thawing at once, the collector running.
func TestStackCopyConcurrent(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const workers, each = 8, 40
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for k := 0; k < each; k++ {
				c := &stackState{}
				sum := 0
				c.body = func() { scDeep(c, 10+k%20, 5, &sum) }
				for i := 0; !c.done; i++ {
					if i > 10 || c.refusal() != nil {
						errs <- fmt.Errorf("worker %d: %v", w, c.refusal())
						return
					}
					done := make(chan struct{})
					go func() { defer close(done); c.run() }()
					<-done
				}
				if sum == 0 {
					errs <- fmt.Errorf("worker %d: no result", w)
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// scBig is a frame with a large local array: a record holding it needs
// more stack than a fresh goroutine has, so the return barrier must grow
// the stack (arch.Thaw's pinned growth) while it holds the result
// registers of the frame that returned into it.
//
//go:noinline
func scBig(c *stackState, depth, yields int) (*capNode, float64, int) {
	var big [6 << 10]uintptr // 48 KiB
	for i := range big {
		big[i] = uintptr(depth*i) ^ 0x5a5a
	}
	p, f, n := scSmall(c, depth-1, yields)
	// The results came back through the barrier, from a frame whose
	// record was thawed before this one was grown room for.
	if p == nil || p.v != n*3 || f != float64(n)/3 {
		panic(fmt.Sprintf("depth %d: results %v %v %d after the barrier", depth, p, f, n))
	}
	for i := range big {
		if big[i] != uintptr(depth*i)^0x5a5a {
			panic(fmt.Sprintf("depth %d: big[%d] changed", depth, i))
		}
	}
	return &capNode{v: (n + 1) * 3}, float64(n+1) / 3, n + 1
}

//go:noinline
func scSmall(c *stackState, depth, yields int) (*capNode, float64, int) {
	if depth <= 0 {
		for range yields {
			if !stackYield(c) {
				panic(c.refusal())
			}
		}
		for range 8 { // collections while the big frames are frozen shrink this stack
			runtime.GC()
		}
		return &capNode{v: 0}, 0, 0
	}
	if depth%3 == 0 && depth >= 6 {
		return scBig(c, depth, yields)
	}
	p, f, n := scSmall(c, depth-1, yields)
	if p == nil || p.v != n*3 || f != float64(n)/3 {
		panic(fmt.Sprintf("depth %d: results %v %v %d after the barrier", depth, p, f, n))
	}
	runtime.GC()
	return &capNode{v: (n + 1) * 3}, float64(n+1) / 3, n + 1
}

// The barrier grows the stack when the next record does not fit, keeping
// the result registers of the frame that returned into it, pointers
// included, while the collector runs.
func TestBarrierGrowsStack(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	// The test needs records: under WEFT_THAW=eager there is one.
	defer func(eager bool) { eagerThaw = eager }(eagerThaw)
	eagerThaw = false
	defer collectWhile()()
	for _, depth := range []int{6, 10, 31} {
		shorts := thawstat.Grown.Load()
		c := &stackState{}
		var n int
		c.body = func() { _, _, n = scSmall(c, depth, 3) }
		runToEnd(t, c, 10)
		if n != depth {
			t.Fatalf("depth %d: the body computed %d", depth, n)
		}
		grown := thawstat.Grown.Load() - shorts
		if grown == 0 {
			t.Fatalf("depth %d: the barrier never had to grow the stack: the test does not test what it says", depth)
		}
		t.Logf("depth %d: the barrier grew the stack %d times", depth, grown)
	}
}

// scTemplated yields in a loop with heap pointers and scalars live across
// each yield, and no stack objects: a region the capture template covers.
//
//go:noinline
func scTemplated(c *stackState, rounds int, sawTemplate *bool) int {
	heap := &capNode{v: 7}
	capEscape = heap // on the heap, not a stack object of this frame
	n := 1000
	sum := 0
	for i := 0; i < rounds; i++ {
		if !stackYield(c) {
			panic(c.refusal())
		}
		*sawTemplate = *sawTemplate || c.chunk.tmpl != nil
		runtime.GC()
		sum += heap.v + n
		n++
	}
	return sum
}

var capEscape *capNode

// runWithDeferRecord runs c once from a frame with a heap defer record
// pending (a defer in a loop), which the template fast path leaves to the
// general capture, since it does not look for defer records.
//
//go:noinline
func runWithDeferRecord(c *stackState) {
	for i := 0; i < 1; i++ {
		defer func() {}()
	}
	c.run()
}

// The capture template is taken on the rounds it covers and handed back to
// the general path on the others (here: a defer record on the goroutine),
// and every value survives either way.
func TestCaptureTemplateFallsBack(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const rounds = 40
	c := &stackState{}
	var sum int
	saw := false
	c.body = func() { sum = scTemplated(c, rounds, &saw) }
	for i := 0; !c.done; i++ {
		if i > rounds+2 {
			t.Fatal("the body did not finish")
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if i%2 == 1 {
				runWithDeferRecord(c)
			} else {
				c.run()
			}
		}()
		<-done
		if c.refusal() != nil {
			t.Fatal(c.refusal())
		}
	}
	want := 0
	for i := 0; i < rounds; i++ {
		want += 7 + 1000 + i
	}
	if sum != want {
		t.Fatalf("the body computed %d, want %d", sum, want)
	}
	if !saw {
		t.Fatal("no capture made a template: the test does not test the fast path")
	}
}

// countScYields has stackYield count what it freezes, in hooks.yieldCounts,
// until the test ends.
func countScYields(t *testing.T) {
	hooks.yieldCounts = new(counters)
	t.Cleanup(func() { hooks.yieldCounts = nil })
}

// scTemplatedNil yields in a loop with a pointer live across each yield
// that is nil for the first half of the rounds, and counts the captures
// that took the fast path.
//
//go:noinline
func scTemplatedNil(c *stackState, rounds int, fast *int) int {
	var p *capNode
	sum := 0
	for i := 0; i < rounds; i++ {
		before := hooks.yieldCounts.templated.Load()
		if !stackYield(c) {
			panic(c.refusal())
		}
		if hooks.yieldCounts.templated.Load() != before {
			*fast++
		}
		if p != nil {
			sum += p.v
		}
		p = nilUntil(i, rounds/2)
		runtime.GC()
	}
	return sum
}

//go:noinline
func nilUntil(i, n int) *capNode {
	if i < n {
		return nil
	}
	p := &capNode{v: i}
	capEscape = p
	return p
}

// A live pointer word that is nil when the general capture makes the
// template still gets a place in the template's record: the fast path must
// find room for every word the maps mark live, not only for the pointers
// the general capture saw, or it never runs.
func TestCaptureTemplateNilPointers(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const rounds = 40
	countScYields(t)
	c := &stackState{}
	var sum, fast int
	c.body = func() { sum = scTemplatedNil(c, rounds, &fast) }
	runToEnd(t, c, rounds+2)
	want := 0
	for i := rounds / 2; i < rounds-1; i++ {
		want += i
	}
	if sum != want {
		t.Fatalf("the body computed %d, want %d", sum, want)
	}
	// The first two captures make the template; every later one fits it.
	if fast < rounds-3 {
		t.Fatalf("%d of %d captures took the fast path, want at least %d", fast, rounds, rounds-3)
	}
}

//go:noinline
func scYieldA(c *stackState) bool { return stackYield(c) }

//go:noinline
func scYieldB(c *stackState) bool { return stackYield(c) }

// scAlternating yields from two call chains in turn, counting the
// captures that took the fast path.
//
//go:noinline
func scAlternating(c *stackState, rounds int, fast *int) int {
	heap := &capNode{v: 3}
	capEscape = heap
	sum := 0
	for i := 0; i < rounds; i++ {
		before := hooks.yieldCounts.templated.Load()
		ok := false
		if i%2 == 0 {
			ok = scYieldA(c)
		} else {
			ok = scYieldB(c)
		}
		if !ok {
			panic(c.refusal())
		}
		if hooks.yieldCounts.templated.Load() != before {
			*fast++
		}
		sum += heap.v + i
		runtime.GC()
	}
	return sum
}

// A yield loop that alternates between two call chains takes the fast
// path on both, each with its own template (templateAt), though the chunk
// keeps only the last one.
func TestCaptureTemplateAlternating(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const rounds = 40
	countScYields(t)
	c := &stackState{}
	var sum, fast int
	c.body = func() { sum = scAlternating(c, rounds, &fast) }
	runToEnd(t, c, rounds+2)
	if want := rounds*3 + rounds*(rounds-1)/2; sum != want {
		t.Fatalf("the body computed %d, want %d", sum, want)
	}
	if fast < rounds-4 {
		t.Fatalf("%d of %d captures took the fast path, want at least %d", fast, rounds, rounds-4)
	}
}

// Every continuation, and so every virtual thread, carries a Cont: it
// keeps to the 192-byte size class on the stack-copying backend, and to
// the 288-byte one with its counters (NewCont). A field added must pay for
// itself.
func TestContSize(t *testing.T) {
	if n := unsafe.Sizeof(Cont{}); n > 192 {
		t.Fatalf("Cont is %d bytes, over its 192-byte budget (a size class)", n)
	}
	if n := unsafe.Sizeof(countedCont{}); n > 288 {
		t.Fatalf("a Cont with counters is %d bytes, over its 288-byte budget (a size class)", n)
	}
}

// growBy uses more than n KiB of stack, so that a goroutine whose stack
// is smaller has it copied to a larger one.
//
//go:noinline
func growBy(n int) uintptr {
	var pad [128]uintptr // on the stack: only indexed, never escapes
	pad[n%128] = uintptr(n)
	if n > 0 {
		pad[(n*7)%128] += growBy(n - 1)
	}
	return pad[(n*3)%128]
}

// The alternating yield loop of TestCaptureTemplateAlternating with the
// stack moved at the steps of templateAt's walk (the hook outgrows the
// stack until it is 256 KiB; each resume runs on a fresh goroutine), while
// the collector runs between yields (and, in CI, with GOGC=1 and the
// GODEBUG checks). Every value must survive, and the captures must still
// take the fast path. templateAt's answer is only a hint, which
// fastCapture checks against the live stack before it copies anything, so
// a walk that read the old stack after a move would find stale but equal
// PCs there and pass too: what this test holds is that a stack move in
// the middle of a capture's fast path loses nothing.
func TestCaptureTemplateStackGrowth(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	moves := 0
	hooks.templateAt = func() {
		// Outgrow the stack, up to 256 KiB: the runtime copies it.
		g := rt.CurG()
		if size := g.StackHi - g.StackLo; size < 256<<10 {
			hi := g.StackHi
			growBy(int(size>>10) + 1)
			if rt.CurG().StackHi != hi {
				moves++
			}
		}
	}
	defer func() { hooks.templateAt = nil }()
	const rounds = 40
	countScYields(t)
	c := &stackState{}
	var sum, fast int
	c.body = func() { sum = scAlternating(c, rounds, &fast) }
	runToEnd(t, c, rounds+2)
	if want := rounds*3 + rounds*(rounds-1)/2; sum != want {
		t.Fatalf("the body computed %d, want %d", sum, want)
	}
	if fast < rounds-4 {
		t.Fatalf("%d of %d captures took the fast path", fast, rounds)
	}
	if moves == 0 {
		t.Fatal("the stack never moved during templateAt: the test does not test what it says")
	}
	t.Logf("the stack moved %d times during templateAt", moves)
}

// resetDeep recurses depth frames, each holding a heap pointer, and
// yields at the bottom; then it panics there if boom is set, with frames
// still frozen below the barrier and nothing deferred in them.
//
//go:noinline
func resetDeep(s *scope.Scope, depth int, boom bool) int {
	h := &capNode{v: depth}
	if depth == 0 {
		if _, perr := Yield(s); perr != nil {
			panic(perr)
		}
		if boom {
			panic("boom")
		}
		return h.v
	}
	return resetDeep(s, depth-1, boom) + h.v
}

// A record that has been Reset keeps its chunk's arrays and its host
// closure when its body ends, with no pointer left in them, whether the
// body returned or panicked with frames still frozen; the next body after
// a Reset freezes into the same arrays.
func TestResetKeepsArrays(t *testing.T) {
	if !useStackCopy {
		t.Skip("the stack-copying backend is not active")
	}
	s := scope.New("reset-keeps")
	c := NewCont(s, func() {})
	c.Run(nil) // a record's first body keeps nothing: it is not yet reused
	if c.stack.chunk.Mem != nil || c.stack.host != nil {
		t.Fatal("a record that was never reset kept its arrays")
	}
	for round := range 6 {
		boom := round%2 == 1
		c.Reset(s, func() { resetDeep(s, 20, boom) })
		c.Run(nil) // to the yield
		mem, ptrs := c.stack.chunk.Mem, c.stack.chunk.Ptrs
		if round >= 1 && (mem != prevMem || ptrs != prevPtrs) {
			t.Fatalf("round %d: the body froze into new arrays, not the kept ones", round)
		}
		prevMem, prevPtrs = mem, ptrs
		func() {
			defer func() {
				if r := recover(); (r != nil) != boom {
					t.Fatalf("round %d: recovered %v", round, r)
				}
			}()
			c.Run(nil) // thaws the top frames only; the rest stay frozen
		}()
		if !c.IsDone() {
			t.Fatalf("round %d: the body did not end", round)
		}
		k := &c.stack.chunk
		if k.Mem != mem || k.Ptrs != ptrs || c.stack.host == nil {
			t.Fatalf("round %d: the ended record did not keep its arrays and host", round)
		}
		if k.MemTop != 0 || k.PtrTop != 0 || k.ptrHigh != 0 {
			t.Fatalf("round %d: the kept chunk is not empty: tops %d, %d, high %d", round, k.MemTop, k.PtrTop, k.ptrHigh)
		}
		for i, p := range k.pointers() {
			if p != nil {
				t.Fatalf("round %d: the kept pointers array still holds %p at %d", round, p, i)
			}
		}
		runtime.GC()
	}
}

var prevMem, prevPtrs unsafe.Pointer

// bpChainFrames is the number of bpRecurse frames checkBPChain found
// linked, summed over the checks.
var bpChainFrames int

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

// The start-up probe that runs a Cont through Run and Yield passes here,
// again after start-up, and leaves the backend switch as it found it.
func TestStackCopyProbeYield(t *testing.T) {
	if !useStackCopy {
		// The probe would switch the engine while other goroutines of the
		// tests may still be using the portable backend.
		t.Skip("the probe switches the engine to stack copying while it runs: " + Backend())
	}
	before := useStackCopy
	for range 3 {
		if err := probe(probeYield); err != nil {
			t.Fatal(err)
		}
		if useStackCopy != before {
			t.Fatalf("useStackCopy is %v after the probe, want %v", useStackCopy, before)
		}
	}
}

// TestFinishedKeepsOnlyArrays checks that the end of a body that a Reset
// will follow (finished with keep) leaves nothing of the record's
// stack-copying state but the chunk's arrays, emptied of the pointers
// they held, and the host closure: finished clears the rest field by
// field, and a field added to stackState or stackChunk and not to finished
// fails here.
func TestFinishedKeepsOnlyArrays(t *testing.T) {
	var c stackState
	fillNonZero(t, reflect.ValueOf(&c).Elem(), "")
	mem := make([]uintptr, 8)
	ptrs := make([]unsafe.Pointer, 4)
	for i := range ptrs {
		ptrs[i] = unsafe.Pointer(new(int))
	}
	c.chunk.Mem, c.chunk.memLen = unsafe.Pointer(&mem[0]), uint32(len(mem))
	c.chunk.Ptrs, c.chunk.ptrsLen = unsafe.Pointer(&ptrs[0]), uint32(len(ptrs))
	c.chunk.PtrTop, c.chunk.ptrHigh = 2, 3
	host, body := c.host, c.body
	c.finished(true)
	keep := map[string]bool{".chunk.Link.Mem": true, ".chunk.memLen": true, ".chunk.Link.Ptrs": true, ".chunk.ptrsLen": true, ".host": true, ".body": true}
	if bad := nonZeroFields(reflect.ValueOf(&c).Elem(), "", keep); len(bad) > 0 {
		t.Errorf("finished(true) left %s set", strings.Join(bad, ", "))
	}
	if c.chunk.Mem != unsafe.Pointer(&mem[0]) || c.chunk.memLen != 8 || c.chunk.Ptrs != unsafe.Pointer(&ptrs[0]) || c.chunk.ptrsLen != 4 {
		t.Errorf("finished(true) dropped the arrays: %+v", c.chunk.Link)
	}
	if reflect.ValueOf(c.host).Pointer() != reflect.ValueOf(host).Pointer() {
		t.Error("finished(true) dropped the host closure")
	}
	if reflect.ValueOf(c.body).Pointer() != reflect.ValueOf(body).Pointer() {
		t.Error("finished(true) dropped the body, which a Reset to the same one would store again")
	}
	if ptrs[0] != nil || ptrs[1] != nil || ptrs[2] != nil {
		t.Errorf("finished(true) left pointers below max(PtrTop, ptrHigh): %v", ptrs[:3])
	}
	// Without keep, or with arrays too large to keep, nothing is left.
	for _, keep := range []bool{false, true} {
		var d stackState
		fillNonZero(t, reflect.ValueOf(&d).Elem(), "")
		if keep {
			d.chunk.Mem, d.chunk.memLen = unsafe.Pointer(&mem[0]), maxKeptArrays // words: over the bytes kept
			d.chunk.Ptrs, d.chunk.ptrsLen = unsafe.Pointer(&ptrs[0]), uint32(len(ptrs))
		}
		d.finished(keep)
		if bad := nonZeroFields(reflect.ValueOf(&d).Elem(), "", nil); len(bad) > 0 {
			t.Errorf("finished(%v) with arrays it does not keep left %s set", keep, strings.Join(bad, ", "))
		}
	}
}
