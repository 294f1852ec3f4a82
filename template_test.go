//go:build amd64 && !race && !msan && !asan

package weft

import (
	"errors"
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// The capture fast path writes a record into the chunk's arrays by address,
// without bounds checks: its room check is all that keeps it inside them.
// A chunk's arrays fit its own templates. A capture from another call
// chain takes that chain's template from the cache (templateAt). Another
// continuation may have published it, for a record larger than this chunk
// has room for. The record may lack room in words (a large frame), or in
// pointers only (a frame of many pointers, after captures that grew the
// words but not the pointers). The fast path must then refuse, and the
// general path capture the region, which makes room. Values come back
// intact either way.

// roomWords yields from a frame of 1,024 words and no pointers.
//
//go:noinline
func roomWords(c *stackState, k uintptr) bool {
	var pad [1024]uintptr
	for i := range pad {
		pad[i] = uintptr(i) * k
	}
	if !stackYield(c) {
		panic(c.refusal())
	}
	for i := range pad {
		if pad[i] != uintptr(i)*k {
			return false
		}
	}
	return true
}

// roomPtrs yields from a frame of 256 pointers.
//
//go:noinline
func roomPtrs(c *stackState, k int) bool {
	var pad [256]*capNode
	for i := range pad {
		pad[i] = &capNode{v: i * k}
	}
	if !stackYield(c) {
		panic(c.refusal())
	}
	for i := range pad {
		if pad[i].v != i*k {
			return false
		}
	}
	return true
}

// roomTiny yields from a small frame.
//
//go:noinline
func roomTiny(c *stackState, k int) bool {
	v := roomNode(k)
	if !stackYield(c) {
		panic(c.refusal())
	}
	return v.v == k
}

// roomNode returns a heap node (not one on roomTiny's stack, a stack
// object that would keep its frame off the fast path).
//
//go:noinline
func roomNode(k int) *capNode { return &capNode{v: k} }

// roomLog is what roomPattern records of each yield: whether its capture
// took the fast path, and the chunk's array lengths before it.
type roomLog struct {
	fast            []bool
	memLen, ptrsLen []uint32
}

// roomPattern yields once per letter of pattern, from roomTiny (t),
// roomWords (w) or roomPtrs (p), each from one call site, so that two
// continuations running it share the three chains' templates. It logs
// each yield, and fails t if a value came back wrong or a chunk's tops
// passed its arrays' ends.
//
//go:noinline
func roomPattern(t *testing.T, c *stackState, pattern string, log *roomLog) {
	for i := range len(pattern) {
		before := hooks.yieldCounts.templated.Load()
		log.memLen = append(log.memLen, c.chunk.memLen)
		log.ptrsLen = append(log.ptrsLen, c.chunk.ptrsLen)
		ok := false
		switch pattern[i] {
		case 't':
			ok = roomTiny(c, i+1)
		case 'w':
			ok = roomWords(c, uintptr(i+1))
		case 'p':
			ok = roomPtrs(c, i+1)
		}
		roomChecked(t, c, i, pattern[i], ok)
		log.fast = append(log.fast, hooks.yieldCounts.templated.Load() != before)
		runtime.GC()
	}
}

// roomChecked is roomPattern's checks, in a frame of their own: the
// arguments of t.Errorf are a stack object, which would keep roomPattern's
// frame, frozen with every yield, off the fast path.
//
//go:noinline
func roomChecked(t *testing.T, c *stackState, i int, which byte, ok bool) {
	if !ok {
		t.Errorf("yield %d (%c): a value came back wrong", i, which)
	}
	if k := &c.chunk; k.MemTop > uintptr(k.memLen) || k.PtrTop > uintptr(k.ptrsLen) {
		t.Errorf("yield %d (%c): tops %d/%d past the arrays' %d/%d", i, which, k.MemTop, k.PtrTop, k.memLen, k.ptrsLen)
	}
}

func TestFastCaptureRoomCheck(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	for _, tc := range []struct {
		name      string
		publish   string // the first continuation's yields: publish the large template
		run       string // the second's
		refused   int    // the yield of run whose capture must not be fast
		fastLater int    // a later yield of the same chain, which must be
		words     bool   // whether the record does not fit the words (else only the pointers)
	}{
		{"words", "wwwwww", "tttttttwtw", 7, 9, true},
		{"pointers", "pppppp", "wwwwwwwpwp", 7, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			countScYields(t)
			var log0, log1 roomLog
			c0 := &stackState{}
			c0.body = func() { roomPattern(t, c0, tc.publish, &log0) }
			runToEnd(t, c0, len(tc.publish)+2)
			if !log0.fast[len(log0.fast)-1] {
				t.Fatalf("the first continuation's captures %v: its last was not fast, so no template was published", log0.fast)
			}
			c1 := &stackState{}
			c1.body = func() { roomPattern(t, c1, tc.run, &log1) }
			runToEnd(t, c1, len(tc.run)+2)
			fast := log1.fast
			if !fast[tc.refused-1] {
				t.Fatalf("the second continuation's captures %v: the one before the other chain's was not fast", fast)
			}
			memLen, ptrsLen := log1.memLen[tc.refused], log1.ptrsLen[tc.refused]
			if fast[tc.refused] {
				t.Fatalf("the second continuation's captures %v: the other chain's took the fast path into arrays of %d words and %d pointers", fast, memLen, ptrsLen)
			}
			if !fast[tc.fastLater] {
				t.Errorf("the second continuation's captures %v: the other chain's later capture was not fast once the general path made room", fast)
			}
			// Which half of the room check refused it: the test's point is
			// to cover each.
			t0 := c0.chunk.tmpl
			if t0 == nil {
				t.Fatal("the first continuation keeps no template")
			}
			needWords, needPtrs := t0.size, t0.ptrs
			if tc.words && needWords <= int(memLen) {
				t.Errorf("the other chain's record (%d words) fit the words (%d): the words' half of the check was not exercised", needWords, memLen)
			}
			if !tc.words && (needPtrs <= int(ptrsLen) || needWords > int(memLen)) {
				t.Errorf("the other chain's record (%d words, %d pointers) against arrays of %d and %d: the pointers' half of the check alone was not exercised", needWords, needPtrs, memLen, ptrsLen)
			}
		})
	}
}

// roomEdge yields once per entry of slack, from roomTiny (words) or
// roomPtrs (pointers), each from one call site. Before a yield whose
// entry is not noSlack, it shortens the chunk's array of words (or of
// pointers) to end that many entries past what the yield's record needs:
// -1 is one short, 0 exactly enough.
//
//go:noinline
func roomEdge(t *testing.T, c *stackState, words bool, slack []int, log *roomLog) {
	for i := range len(slack) {
		before := hooks.yieldCounts.templated.Load()
		if slack[i] != noSlack {
			shortenRoom(c, words, slack[i])
		}
		ok := false
		if words {
			ok = roomTiny(c, i+1)
		} else {
			ok = roomPtrs(c, i+1)
		}
		roomChecked(t, c, i, 'e', ok)
		log.fast = append(log.fast, hooks.yieldCounts.templated.Load() != before)
		runtime.GC()
	}
}

const noSlack = 1 << 20

// shortenRoom sets the length the chunk's words (or pointers) are known
// by to its top plus what a record of its template needs plus slack
// (slack <= 0). It only ever shortens it, and only where the array behind
// has room for the whole record, so the fast path's writes stay in the
// array even if its room check were wrong by one.
//
//go:noinline
func shortenRoom(c *stackState, words bool, slack int) {
	k := &c.chunk
	tm := k.tmpl
	if tm == nil {
		panic("shortenRoom: the chunk has no template yet")
	}
	top, need, have := int(k.PtrTop), tm.ptrs, &k.ptrsLen
	if words {
		top, need, have = int(k.MemTop), tm.size, &k.memLen
	}
	if top+need > int(*have) {
		panic("shortenRoom: the array is shorter than the record: the capture before, which did not fit, took the fast path instead of making room")
	}
	*have = uint32(top + need + slack)
}

// The room check's boundary, for each half: a record one word (or
// pointer) larger than the room left must go to the general path, which
// makes room; one that fits exactly must take the fast path. Either
// off-by-one in fastCapture's check fails this.
func TestFastCaptureRoomBoundary(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	slack := []int{noSlack, noSlack, noSlack, noSlack, noSlack, -1, noSlack, 0, noSlack}
	const short, exact = 5, 7
	for _, words := range []bool{true, false} {
		name := "pointers"
		if words {
			name = "words"
		}
		t.Run(name, func(t *testing.T) {
			countScYields(t)
			var log roomLog
			c := &stackState{}
			c.body = func() { roomEdge(t, c, words, slack, &log) }
			runToEnd(t, c, len(slack)+2)
			fast := log.fast
			if !fast[short-1] {
				t.Fatalf("captures %v: the one before the short room was not fast: the test tests nothing", fast)
			}
			if fast[short] {
				t.Errorf("captures %v: a record one %s too large for the room left took the fast path", fast, name[:len(name)-1])
			}
			if !fast[exact] {
				t.Errorf("captures %v: a record that fits the room left exactly did not take the fast path", fast)
			}
			if !fast[len(fast)-1] {
				t.Errorf("captures %v: the last was not fast", fast)
			}
		})
	}
}

// shiftCallerBP adds delta to the frame pointer its caller saved: the
// word under the caller's return address, which holds the address of the
// caller's caller's own saved frame pointer. delta 8 points it at that
// frame's return address instead: still an address in the stack, which a
// stack copy relocates like the real one, so that shifting it back by -8
// restores the chain wherever the stack has moved meanwhile.
//
//go:noinline
func shiftCallerBP(delta uintptr) {
	pc, sp := arch.CallerPCSP()
	d := descFor(pc)
	pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
	sp = unsafe.Add(sp, d.size)
	if d = descFor(pc); !d.hasBP {
		panic("shiftCallerBP: the caller saves no frame pointer")
	}
	*(*uintptr)(unsafe.Add(sp, d.size-16)) += delta
}

// bpYield yields from one call site; with bad, its saved frame pointer is
// off by a word during the capture. It puts it back if the yield was
// refused; had the capture taken the region, the thaw would have rebuilt
// the chain, and it leaves it alone.
//
//go:noinline
func bpYield(c *stackState, k int, bad bool) (ok, suspended bool) {
	v := roomNode(k)
	if bad {
		shiftCallerBP(8)
	}
	suspended = stackYield(c)
	if bad && !suspended {
		shiftCallerBP(^uintptr(7)) // -8
	}
	return v.v == k, suspended
}

// bpLog is what bpPattern records of each yield.
type bpLog struct {
	fast, suspended []bool
	refusals        []error
}

// bpPattern yields once per entry of bad from bpYield, breaking the
// frame-pointer chain where bad says so, and logs each yield.
//
//go:noinline
func bpPattern(t *testing.T, c *stackState, bad []bool, log *bpLog) {
	for i := range len(bad) {
		before := hooks.yieldCounts.templated.Load()
		ok, suspended := bpYield(c, i+1, bad[i])
		log.fast = append(log.fast, hooks.yieldCounts.templated.Load() != before)
		log.suspended = append(log.suspended, suspended)
		log.refusals = append(log.refusals, takeRefusal(c))
		roomChecked(t, c, i, 'b', ok)
	}
}

// takeRefusal returns and clears the error of c's last refused yield.
//
//go:noinline
func takeRefusal(c *stackState) error {
	err := c.refusal()
	if err != nil {
		c.rare.err = nil
	}
	return err
}

// Every saved frame pointer of a templated region but the outermost must
// hold the address of the next frame's: the fast path checks each link
// against the live stack before it stores the links as word indexes, as
// the general path does. Go code keeps the chain, so the test breaks it
// by hand in one frame for one capture. The fast path must refuse it, and
// the general path pin the yield (UnknownFrame). The frames go on where
// they are. The captures before and after take the fast path.
func TestFastCaptureFramePointerLink(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	countScYields(t)
	bad := []bool{false, false, false, false, false, true, false, false}
	const broken = 5
	var log bpLog
	c := &stackState{}
	c.body = func() { bpPattern(t, c, bad, &log) }
	runToEnd(t, c, len(bad)+2)
	if !log.fast[broken-1] {
		t.Fatalf("captures %v: the one before the broken chain was not fast: the test tests nothing", log.fast)
	}
	if log.fast[broken] || log.suspended[broken] {
		t.Errorf("a region whose frame-pointer chain is broken was captured (fast path: %v)", log.fast[broken])
	}
	var pe *errPinned
	if err := log.refusals[broken]; !errors.As(err, &pe) || pe.reason != pinning.UnknownFrame {
		t.Errorf("the broken chain's yield was refused with %v, want a pin for an unknown frame", err)
	}
	for i, err := range log.refusals {
		if i != broken && (err != nil || !log.suspended[i]) {
			t.Errorf("yield %d: suspended %v, refused with %v", i, log.suspended[i], err)
		}
	}
	if !log.fast[len(bad)-1] {
		t.Errorf("captures %v: the last was not fast", log.fast)
	}
}

// A live pointer word of a templated region may point into the stack.
// Here it points into the test function's frame, under the continuation's
// entry, on the goroutine that resumes it. That depends on the value, not
// on the chain. So the fast path must look at each pointer word and
// refuse. The general path then pins the yield with StackPointer: the
// pointer would dangle once thawed elsewhere. The same chain's captures
// before and after, with a heap pointer in that word, take the fast path.
//
// As TestPinStackPointer (package continuation) does, it hides the
// pointer from escape analysis, grows the stack beforehand and turns the
// collector off, so that the test's frame cannot move meanwhile.
func TestFastCaptureStackPointer(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	stackGrow(64 << 10)
	fastStackPointer(t)
}

// stackHandoff carries the pointer the next stackPtrYield holds, and the
// stack pointer for the body to take it from (a body closure capturing
// the pointer itself would keep it in its frame across every yield).
type stackHandoff struct{ p, stack *int }

// stackPtrYield yields with h's pointer live across the yield, and adds 1
// through it after.
//
//go:noinline
func stackPtrYield(c *stackState, h *stackHandoff) bool {
	p := h.p
	h.p = nil // no heap copy of a stack pointer outlives the handoff
	ok := stackYield(c)
	*p++
	return ok
}

//go:noinline
func fastStackPointer(t *testing.T) {
	countScYields(t)
	const rounds, stackRound = 12, 8
	var x int
	px := (*int)(stackNoescape(unsafe.Pointer(&x)))
	heap := new(int)
	h := &stackHandoff{stack: px}
	var ok, fast [rounds]bool
	c := &stackState{}
	c.body = func() {
		for i := range rounds {
			h.p = heap
			if i == stackRound {
				h.p, h.stack = h.stack, nil
			}
			before := hooks.yieldCounts.templated.Load()
			ok[i] = stackPtrYield(c, h)
			fast[i] = hooks.yieldCounts.templated.Load() != before
		}
	}
	// Resumed on this goroutine (runToEnd uses new ones), so that px
	// points into the stack the captures run on.
	for i := 0; !c.done; i++ {
		if i > rounds+2 {
			t.Fatal("the body did not finish")
		}
		c.run()
	}
	if !fast[stackRound-1] || !fast[stackRound+1] {
		t.Fatalf("captures fast %v: the rounds around the stack pointer's must take the fast path", fast)
	}
	if ok[stackRound] || fast[stackRound] {
		t.Fatalf("the capture with a pointer into the stack: suspended %v, fast %v; want refused, by the general path", ok[stackRound], fast[stackRound])
	}
	for i, y := range ok {
		if !y && i != stackRound {
			t.Errorf("round %d did not suspend", i)
		}
	}
	if x != 1 || *heap != rounds-1 {
		t.Errorf("the stack variable is %d (want 1) and the heap one %d (want %d)", x, *heap, rounds-1)
	}
}

// stackNoescape hides p from escape analysis (see pinNoescape in package
// continuation's tests).
//
//go:nocheckptr
//go:nosplit
func stackNoescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return unsafe.Add(nil, x)
}

// stackGrow uses about n bytes of stack.
//
//go:noinline
func stackGrow(n int) byte {
	var pad [1024]byte
	pad[n%len(pad)] = byte(n)
	if n <= len(pad) {
		return pad[n%len(pad)]
	}
	return stackGrow(n-len(pad)) + pad[n%len(pad)]
}

// A set of the template cache keeps the two chains published last, so
// that two chains whose hashes collide both keep their templates; a third
// evicts the older.
func TestTemplateSetKeepsTwo(t *testing.T) {
	var set templateSet
	mk := func(pc uintptr) *captureTemplate {
		return &captureTemplate{selfPC: 1, nf: 1, hash: chainHash(0, pc), pcs: []uintptr{pc}, stopPC: 2}
	}
	find := func(pc uintptr) *captureTemplate {
		return set.find(chainHash(0, pc), 1, 1, 0, 2)
	}
	a, b, c := mk(10), mk(20), mk(30)
	set.publish(a)
	set.publish(b)
	if find(10) != a || find(20) != b {
		t.Fatalf("after two publishes: %p %p, want %p %p", find(10), find(20), a, b)
	}
	set.publish(c)
	if find(10) != nil || find(20) != b || find(30) != c {
		t.Fatalf("after a third: %p %p %p, want nil %p %p", find(10), find(20), find(30), b, c)
	}
	if tm := find(40); tm != nil {
		t.Fatalf("a chain never published found %p", tm)
	}
	h := chainHash(0, 20)
	if set.find(h, 1, 1, 7, 2) != nil || set.find(h, 1, 1, 0, 3) != nil || set.find(h, 1, 9, 0, 2) != nil || set.find(h, 2, 1, 0, 2) != nil {
		t.Fatal("a template matched another skip, barrier or capture PC")
	}
}

// templatedLoop yields in a loop with heap pointers and scalars live across
// each yield, and no stack objects: a region the capture template covers.
//
//go:noinline
func templatedLoop(c *stackState, rounds int, sawTemplate *bool) int {
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
	c.body = func() { sum = templatedLoop(c, rounds, &saw) }
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

// templatedNilLoop yields in a loop with a pointer live across each yield
// that is nil for the first half of the rounds, and counts the captures
// that took the fast path.
//
//go:noinline
func templatedNilLoop(c *stackState, rounds int, fast *int) int {
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
// template still gets a place in the template's record. The fast path
// needs room for every word the maps mark live, not only for the pointers
// the general capture saw. Without it, it never runs.
func TestCaptureTemplateNilPointers(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	const rounds = 40
	countScYields(t)
	c := &stackState{}
	var sum, fast int
	c.body = func() { sum = templatedNilLoop(c, rounds, &fast) }
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
func yieldChainA(c *stackState) bool { return stackYield(c) }

//go:noinline
func yieldChainB(c *stackState) bool { return stackYield(c) }

// alternatingChains yields from two call chains in turn, counting the
// captures that took the fast path.
//
//go:noinline
func alternatingChains(c *stackState, rounds int, fast *int) int {
	heap := &capNode{v: 3}
	capEscape = heap
	sum := 0
	for i := 0; i < rounds; i++ {
		before := hooks.yieldCounts.templated.Load()
		ok := false
		if i%2 == 0 {
			ok = yieldChainA(c)
		} else {
			ok = yieldChainB(c)
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
	c.body = func() { sum = alternatingChains(c, rounds, &fast) }
	runToEnd(t, c, rounds+2)
	if want := rounds*3 + rounds*(rounds-1)/2; sum != want {
		t.Fatalf("the body computed %d, want %d", sum, want)
	}
	if fast < rounds-4 {
		t.Fatalf("%d of %d captures took the fast path, want at least %d", fast, rounds, rounds-4)
	}
}

// A template is found by its chain's hash, not by the chain: fastCapture
// compares the chain with the live frames before it uses the template.
// Here a forged template, chain A's under chain B's hash, sits first in
// B's set of the cache. A yield through B must refuse it and take the
// general path, which publishes B's own template again.
func TestFastCaptureChecksChain(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	countScYields(t)
	c := &stackState{}
	var forged *captureTemplate
	forgedFast, sum := -1, 0
	c.body = func() {
		heap := &capNode{v: 3}
		capEscape = heap
		var tA, tB *captureTemplate
		for i := range 12 {
			before := hooks.yieldCounts.templated.Load()
			ok := false
			if i%2 == 0 {
				ok = yieldChainA(c)
			} else {
				ok = yieldChainB(c)
			}
			if !ok {
				panic(c.refusal())
			}
			if i == 9 { // the yield through B after the forgery
				forgedFast = int(hooks.yieldCounts.templated.Load() - before)
				if c.chunk.tmpl == forged {
					panic("the forged template was used for chain B")
				}
			}
			if i%2 == 0 {
				tA = c.chunk.tmpl
			} else {
				tB = c.chunk.tmpl
			}
			if i == 8 && tA != nil && tB != nil && tA != tB {
				f := *tA
				f.hash = tB.hash
				forged = &f
				templateSetOf(f.hash).publish(forged)
			}
			sum += heap.v
		}
	}
	runToEnd(t, c, 14)
	if forged == nil {
		t.Fatal("the two chains did not both get templates")
	}
	if forgedFast != 0 {
		t.Fatalf("the yield through B after the forgery took the fast path %d times, want 0", forgedFast)
	}
	if sum != 12*3 {
		t.Fatalf("the body computed %d, want %d", sum, 12*3)
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

// The alternating yield loop of TestCaptureTemplateAlternating, with the
// stack moved at the steps of templateAt's walk. The hook outgrows the
// stack until it is 256 KiB, and each resume runs on a fresh goroutine.
// The collector runs between yields (in CI with GOGC=1 and the GODEBUG
// checks). Every value must survive, and the captures must still take the
// fast path. templateAt's answer is only a hint, which fastCapture checks
// against the live stack before it copies anything. A walk that read the
// old stack after a move would find stale but equal PCs there, and pass
// too. What this test holds is that a stack move in the middle of a
// capture's fast path loses nothing.
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
	c.body = func() { sum = alternatingChains(c, rounds, &fast) }
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

// A body's first capture is of its frames from its start, above
// arch.Enter: a fresh region. The general path publishes its template,
// and the first capture of the next continuation running the same chain
// takes the fast path, into an empty chunk it sizes for the template. The
// record must be the one the general path writes: the same tables and
// header, in arrays of the same size. Values come back intact through a
// collection, a stack growth and a shrink after the thaw.

// freshYield yields once, with heap pointers and a scalar live across the
// yield, and checks them after it.
//
//go:noinline
func freshYield(c *stackState, k int) int {
	a, b := roomNode(k), roomNode(k+1)
	x := uintptr(k) * 7
	if !stackYield(c) {
		panic(c.refusal())
	}
	runtime.GC()
	growBy(200)  // about 200 KiB of frames: the stack grows
	runtime.GC() // and shrinks again, at most the collection after
	runtime.GC()
	if a.v != k || b.v != k+1 || x != uintptr(k)*7 {
		return -1
	}
	return a.v + b.v
}

// freshRecord is what TestFreshCaptureTemplate compares of a first
// capture's record.
type freshRecord struct {
	fast              bool
	memLen, ptrsLen   uint32
	memTop, ptrTop    uintptr
	tail              []uintptr // the tables and the header
	frames, wordCount uint32
}

// runFresh runs a new continuation over freshYield to its yield, records
// its first capture, and runs it to its end; it returns what the body
// computed.
func runFresh(t *testing.T, k int) (freshRecord, int) {
	t.Helper()
	c := &stackState{}
	got := 0
	c.body = func() { got = freshYield(c, k) }
	before := hooks.yieldCounts.templated.Load()
	done := make(chan struct{})
	go func() { defer close(done); c.run() }()
	<-done
	if c.refusal() != nil || c.done {
		t.Fatalf("the first run did not suspend: %v", c.refusal())
	}
	ch := &c.chunk
	h := arch.HeaderOf(ch.memory()[:ch.MemTop])
	r := freshRecord{
		fast:   hooks.yieldCounts.templated.Load() != before,
		memLen: ch.memLen, ptrsLen: ch.ptrsLen, memTop: ch.MemTop, ptrTop: ch.PtrTop,
		tail:   append([]uintptr(nil), ch.memory()[h.Words:ch.MemTop]...),
		frames: h.Frames, wordCount: h.Words,
	}
	runToEnd(t, c, 3)
	return r, got
}

func TestFreshCaptureTemplate(t *testing.T) {
	countScYields(t)
	// Forget every template: the first continuation takes the general
	// path. Templates are only shortcuts; other tests publish theirs again.
	for i := range templateCache {
		templateCache[i][0].Store(nil)
		templateCache[i][1].Store(nil)
	}
	general, got1 := runFresh(t, 5)
	fast, got2 := runFresh(t, 5)
	if got1 != 11 || got2 != 11 {
		t.Fatalf("the bodies computed %d and %d, want 11", got1, got2)
	}
	if general.fast {
		t.Fatal("the first continuation's first capture took the fast path with no template published")
	}
	if !fast.fast {
		t.Fatal("the second continuation's first capture did not take the fast path")
	}
	if general.memLen != fast.memLen || general.ptrsLen != fast.ptrsLen || general.memTop != fast.memTop ||
		general.ptrTop != fast.ptrTop || general.frames != fast.frames || general.wordCount != fast.wordCount {
		t.Errorf("general path %+v, fast path %+v: the chunks differ", general, fast)
	}
	if len(general.tail) != len(fast.tail) {
		t.Fatalf("tables and header: %d words on the general path, %d on the fast path", len(general.tail), len(fast.tail))
	}
	for i := range general.tail {
		if general.tail[i] != fast.tail[i] {
			t.Errorf("tables and header word %d: %#x on the general path, %#x on the fast path", i, general.tail[i], fast.tail[i])
		}
	}
	// More of them, under collections, each one's first capture fast.
	for k := range 20 {
		r, got := runFresh(t, k)
		if got != 2*k+1 {
			t.Fatalf("continuation %d computed %d, want %d", k, got, 2*k+1)
		}
		if !r.fast {
			t.Fatalf("continuation %d: the first capture did not take the fast path", k)
		}
	}
}

// recordsDeep recurses depth frames, each with a heap pointer and a plain
// value live across the call, and yields at the bottom. Each frame's
// argument parent, its caller's pointer, is live across the call too: it
// lies in the caller's frame, in the callee's argument area, where two
// records' images overlap. Back from the yield, after a collection and a
// stack move, each frame checks all three.
//
//go:noinline
func recordsDeep(c *stackState, parent *capNode, depth, round int) int {
	n := &capNode{v: depth*1000 + round}
	capEscape = n // on the heap: a stack object would keep templates away
	k := depth ^ round
	r := 0
	if depth == 0 {
		if !stackYield(c) {
			panic(c.refusal())
		}
		runtime.GC()
		growBy(16) // the stack may move under the thawed frames
	} else {
		r = recordsDeep(c, n, depth-1, round)
	}
	if n.v != depth*1000+round || k != depth^round || parent.v != (depth+1)*1000+round {
		panic("recordsDeep: a frame's values changed across the yield")
	}
	return r + n.v + k
}

// A region above the barrier that the thaw policy cuts into several
// records has a template too: recursing afresh between yields, every
// capture after the first two takes the fast path, and every frame's
// values come back through the barrier, record by record, intact. A
// region of more than maxTemplateFrames frames has none, and takes the
// general path every time, with the same values.
func TestCaptureTemplateRecords(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	defer func(eager bool) { eagerThaw = eager }(eagerThaw)
	eagerThaw = false // eager thaw cuts no region into records
	for _, tc := range []struct{ depth, minRecs int }{{12, 3}, {50, 6}, {200, 20}, {maxTemplateFrames + 10, 0}} {
		deep := tc.depth > maxTemplateFrames
		const rounds = 30
		countScYields(t)
		c := &stackState{}
		var sum, fast, recs int
		c.body = func() {
			for round := range rounds {
				before := hooks.yieldCounts.templated.Load()
				top := &capNode{v: (tc.depth+1)*1000 + round}
				capEscape = top // on the heap, as every frame's
				sum += recordsDeep(c, top, tc.depth, round)
				if hooks.yieldCounts.templated.Load() != before {
					fast++
				}
				if tm := c.chunk.tmpl; tm != nil {
					recs = max(recs, len(tm.recs))
				}
			}
		}
		runToEnd(t, c, rounds+2)
		want := 0
		for round := range rounds {
			for d := 0; d <= tc.depth; d++ {
				want += d*1000 + round + (d ^ round)
			}
		}
		if sum != want {
			t.Fatalf("depth %d: the body computed %d, want %d", tc.depth, sum, want)
		}
		t.Logf("depth %d: %d of %d captures took the fast path, with templates of up to %d records", tc.depth, fast, rounds, recs)
		if deep {
			if fast != 0 || recs != 0 {
				t.Fatalf("depth %d: %d captures took the fast path, with templates of %d records; a region deeper than %d frames has no template", tc.depth, fast, recs, maxTemplateFrames)
			}
			continue
		}
		if recs < tc.minRecs {
			t.Fatalf("depth %d: the templates had at most %d records, want %d: the region was not cut as the test means", tc.depth, recs, tc.minRecs)
		}
		if fast < rounds-3 {
			t.Fatalf("depth %d: %d of %d captures took the fast path, want at least %d", tc.depth, fast, rounds, rounds-3)
		}
	}
}

// oneRecordYield yields from a frame whose values are the same at every
// call: a heap pointer and a plain value.
//
//go:noinline
func oneRecordYield(c *stackState, n *capNode, v int) int {
	if !stackYield(c) {
		panic(c.refusal())
	}
	return n.v + v
}

// oneRecordStop ends TestFastCaptureOneRecordMatchesLoop's yield loop: a
// global, so that no frame's values change from one yield to the next.
var oneRecordStop bool

// The fast path writes a one-record template's record with code of its
// own, which must match its loop over records (fastRecords). A yield loop
// whose frames hold the same values at every yield captures through each
// in turn; the records and their pointers must be the same, word for
// word.
func TestFastCaptureOneRecordMatchesLoop(t *testing.T) {
	if !rt.Supported {
		t.Skip("runtime layout not mirrored")
	}
	countScYields(t)
	t.Cleanup(func() { hooks.recordLoop, oneRecordStop = false, false })
	n := &capNode{v: 5}
	capEscape = n
	c := &stackState{}
	c.body = func() {
		for !oneRecordStop {
			oneRecordYield(c, n, 7)
		}
	}
	type capture struct {
		words []uintptr
		ptrs  []unsafe.Pointer
		fast  bool
	}
	var got []capture
	for i := range 10 {
		hooks.recordLoop = i%2 == 1
		before := hooks.yieldCounts.templated.Load()
		c.run()
		if err := c.refusal(); err != nil {
			t.Fatal(err)
		}
		k := &c.chunk
		top, ptop := int(k.MemTop), int(k.PtrTop)
		h := arch.HeaderOf(k.memory()[:top])
		got = append(got, capture{
			words: append([]uintptr(nil), k.memory()[top-int(h.Len):top]...),
			ptrs:  append([]unsafe.Pointer(nil), k.pointers()[ptop-int(h.Ptrs):ptop]...),
			fast:  hooks.yieldCounts.templated.Load() != before,
		})
	}
	hooks.recordLoop, oneRecordStop = false, true
	runToEnd(t, c, 2)
	// The first capture is of a fresh region, above arch.Enter; the
	// others are above the barrier, whose words differ from it.
	compared := 0
	for i := 3; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if !a.fast || !b.fast {
			continue
		}
		compared++
		if len(a.words) != len(b.words) || len(a.ptrs) != len(b.ptrs) {
			t.Fatalf("captures %d and %d: records of %d and %d words, %d and %d pointers", i-1, i, len(a.words), len(b.words), len(a.ptrs), len(b.ptrs))
		}
		for j := range a.words {
			if a.words[j] != b.words[j] {
				t.Errorf("captures %d and %d: word %d of %d is %#x and %#x", i-1, i, j, len(a.words), a.words[j], b.words[j])
			}
		}
		for j := range a.ptrs {
			if a.ptrs[j] != b.ptrs[j] {
				t.Errorf("captures %d and %d: pointer %d is %p and %p", i-1, i, j, a.ptrs[j], b.ptrs[j])
			}
		}
	}
	if compared < 6 {
		t.Fatalf("only %d pairs of consecutive captures both took the fast path, want 6", compared)
	}
	if n.v != 5 {
		t.Fatalf("the heap value changed: %d", n.v)
	}
}
