package continuation_test

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/scope"
)

// Leak and GC tests. None of these may call t.Parallel: they count the
// process's goroutines. Other tests may leave goroutines that end a little
// later (abandoned continuations being unwound), so each test first lets
// the count settle, takes it as its baseline, and polls for the count to
// come back to it; and it looks for its own goroutines by the names of
// functions only its continuations run, which no other test can disturb.

const leakPatience = 10 * time.Second

// leakBase is what a leak test compares with at its end: the goroutine
// count, and how many goroutines ran its marker function, at its start.
type leakBase struct {
	goroutines, marked int
	marker             string
}

// leakStart waits for the goroutine count to stop falling and records it,
// with the goroutines that run marker (a function only this test's
// continuations run; earlier tests may have left some, which are theirs to
// report).
func leakStart(marker string) leakBase {
	n := goroutines.Settled()
	return leakBase{goroutines: n, marked: len(leakStacks(marker)), marker: marker}
}

// leakStacks returns the stacks of all goroutines that contain marker.
func leakStacks(marker string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(marker)) {
			out = append(out, string(g))
		}
	}
	return out
}

// wait polls, collecting garbage, until cond holds (returns ""), no more
// goroutines run the marker function than at the start, and the goroutine
// count is back at the baseline.
func (b leakBase) wait(t *testing.T, what string, cond func() string) {
	t.Helper()
	var problem string
	ok := gcPollUntil(leakPatience, func() bool {
		problem = ""
		if cond != nil {
			problem = cond()
		}
		if problem == "" {
			if n := len(leakStacks(b.marker)); n > b.marked {
				problem = fmt.Sprintf("%d goroutines run %s, %d at the start", n, b.marker, b.marked)
			} else if n := runtime.NumGoroutine(); n > b.goroutines {
				problem = fmt.Sprintf("%d goroutines, %d more than the baseline", n, n-b.goroutines)
			}
		}
		return problem == ""
	})
	if !ok {
		msg := fmt.Sprintf("%s: after %v: %s", what, leakPatience, problem)
		if st := leakStacks(b.marker); len(st) > b.marked {
			msg += "\nfor example:\n" + st[len(st)-1]
		}
		t.Fatal(msg)
	}
}

// leakCounters checks that every counter is want, and describes the first
// that is not.
func leakCounters(cs []atomic.Int32, want int32) string {
	for i := range cs {
		if v := cs[i].Load(); v != want {
			return fmt.Sprintf("counter %d of %d is %d, want %d", i, len(cs), v, want)
		}
	}
	return ""
}

// leakFrames recurses depth frames and then yields n times to s. Only
// continuation bodies in this file call it: a goroutine running it is one
// of theirs.
//
//go:noinline
func leakFrames(s *scope.Scope, depth, n int) int {
	if depth > 0 {
		return leakFrames(s, depth-1, n) + 1
	}
	for range n {
		continuation.Yield(s)
	}
	return 0
}

func TestLeakCompleted(t *testing.T) {
	base := leakStart(".leakFrames(")
	const n = 1000
	deferred := make([]atomic.Int32, n)
	for i := range n {
		s := scope.New("completed")
		c := continuation.New(s, func() {
			defer deferred[i].Add(1)
			leakFrames(s, i%8, i%3)
		})
		for !c.IsDone() {
			c.Run()
		}
	}
	if p := leakCounters(deferred, 1); p != "" {
		t.Fatalf("after running to completion: %s", p)
	}
	base.wait(t, "continuations run to completion", nil)
}

func TestLeakSuspendedDropped(t *testing.T) {
	base := leakStart(".leakFrames(")
	const n = 1000
	deferred := make([]atomic.Int32, n)
	var handles atomic.Int32 // handles collected
	func() {
		cs := make([]*continuation.Continuation, n)
		for i := range cs {
			s := scope.New("dropped")
			cs[i] = continuation.New(s, func() {
				defer deferred[i].Add(1)
				leakFrames(s, i%8, 2+i%3)
				t.Errorf("continuation %d resumed after it was dropped", i)
			})
			runtime.AddCleanup(cs[i], func(h *atomic.Int32) { h.Add(1) }, &handles)
			for range 1 + i%2 { // suspended after its first or second yield
				cs[i].Run()
			}
			if cs[i].IsDone() {
				t.Fatalf("continuation %d is done, want it suspended", i)
			}
		}
		if p := leakCounters(deferred, 0); p != "" {
			t.Fatalf("while suspended: %s", p)
		}
	}()
	want := int32(1) // unwound as by runtime.Goexit
	base.wait(t, "suspended continuations dropped", func() string {
		if h := handles.Load(); h != n {
			return fmt.Sprintf("%d of %d handles collected", h, n)
		}
		return leakCounters(deferred, want)
	})
	// Deferred calls run once, not again later.
	runtime.GC()
	if p := leakCounters(deferred, want); p != "" {
		t.Fatal(p)
	}
}

// leakDeferAfter yields n times to s with nothing deferred, then once
// more with a deferred call pending.
//
//go:noinline
func leakDeferAfter(s *scope.Scope, n int, deferred *atomic.Int32) {
	leakFrames(s, 1, n)
	defer deferred.Add(1)
	leakFrames(s, 0, 1)
}

// TestLeakDeferredLaterDropped: continuations suspended first with no
// deferred call pending, and dropped only after a later suspension that
// has one, are unwound; those dropped before it are collected without
// running anything.
func TestLeakDeferredLaterDropped(t *testing.T) {
	base := leakStart(".leakFrames(")
	const n = 300
	deferred := make([]atomic.Int32, n)
	var handles atomic.Int32
	plain := func(i int) int { return 1 + i%3 } // suspensions with none pending
	func() {
		for i := range n {
			s := scope.New("deferred later")
			c := continuation.New(s, func() {
				leakDeferAfter(s, plain(i), &deferred[i])
				t.Errorf("continuation %d resumed after it was dropped", i)
			})
			runtime.AddCleanup(c, func(h *atomic.Int32) { h.Add(1) }, &handles)
			// Odd ones are dropped before the deferred call is made.
			runs := plain(i) + 1
			if i%2 == 1 {
				runs = plain(i)
			}
			for range runs {
				c.Run()
			}
		}
	}()
	base.wait(t, "continuations dropped before and after deferring a call", func() string {
		if h := handles.Load(); h != n {
			return fmt.Sprintf("%d of %d handles collected", h, n)
		}
		for i := range deferred {
			if got, want := deferred[i].Load(), int32(1-i%2); got != want {
				return fmt.Sprintf("continuation %d: deferred call ran %d times, want %d", i, got, want)
			}
		}
		return ""
	})
}

// leakSeq is the sequence the Pull leak tests pull from: it counts up
// until told to stop, and reports that its deferred calls ran.
//
//go:noinline
func leakSeq(started, deferred *atomic.Int32, yield func(int) bool) {
	started.Add(1)
	defer deferred.Add(1)
	for i := 0; ; i++ {
		if !yield(i) {
			return
		}
	}
}

func TestLeakPullDropped(t *testing.T) {
	base := leakStart(".leakSeq(")
	const n = 300
	started := make([]atomic.Int32, n)
	deferred := make([]atomic.Int32, n)
	func() {
		for i := range n {
			next, stop := continuation.Pull(func(yield func(int) bool) {
				leakSeq(&started[i], &deferred[i], yield)
			})
			_ = stop // dropped without being called
			if i%4 == 0 {
				continue // never started: seq must never run
			}
			for j := range i % 4 {
				if v, ok := next(); !ok || v != j {
					t.Fatalf("pull %d: next = %d, %v; want %d, true", i, v, ok, j)
				}
			}
		}
	}()
	base.wait(t, "Pulls dropped without stop", func() string {
		for i := range n {
			wantStarted, wantDeferred := int32(1), int32(1)
			if i%4 == 0 {
				wantStarted, wantDeferred = 0, 0
			}
			if s, d := started[i].Load(), deferred[i].Load(); s != wantStarted || d != wantDeferred {
				return fmt.Sprintf("pull %d: seq started %d times and its deferred call ran %d times, want %d and %d", i, s, d, wantStarted, wantDeferred)
			}
		}
		return ""
	})
}

func TestLeakPullStopped(t *testing.T) {
	base := leakStart(".leakSeq(")
	const n = 300
	started := make([]atomic.Int32, n)
	deferred := make([]atomic.Int32, n)
	for i := range n {
		next, stop := continuation.Pull(func(yield func(int) bool) {
			leakSeq(&started[i], &deferred[i], yield)
		})
		for range i % 3 {
			next()
		}
		stop()
		// stop runs seq to its end (or, unstarted, never runs it), so
		// its deferred call has run by now.
		want := int32(1)
		if i%3 == 0 {
			want = 0
		}
		if s, d := started[i].Load(), deferred[i].Load(); s != want || d != want {
			t.Fatalf("pull %d after stop: seq started %d times, deferred call ran %d times; want %d", i, s, d, want)
		}
		if _, ok := next(); ok {
			t.Fatalf("pull %d: next after stop returned true", i)
		}
	}
	// A Pull iterated to its end needs no stop.
	for range 100 {
		next, _ := continuation.Pull(func(yield func(int) bool) {
			for i := range 3 {
				if !yield(i) {
					return
				}
			}
		})
		for {
			if _, ok := next(); !ok {
				break
			}
		}
	}
	base.wait(t, "Pulls stopped", nil)
}

// leakCoroutineBody is the body of the coroutines of
// TestLeakCoroutineDropped: it echoes its input until dropped.
//
//go:noinline
func leakCoroutineBody(deferred *atomic.Int32, in int, yield func(int) int) int {
	defer deferred.Add(1)
	for {
		in = yield(in + 1)
	}
}

func TestLeakCoroutineDropped(t *testing.T) {
	base := leakStart(".leakCoroutineBody(")
	const n = 300
	deferred := make([]atomic.Int32, n)
	func() {
		for i := range n {
			co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
				return leakCoroutineBody(&deferred[i], in, yield)
			})
			for j := range 1 + i%3 {
				if got := co.Resume(j); got != j+1 {
					t.Fatalf("coroutine %d: Resume(%d) = %d", i, j, got)
				}
			}
		}
	}()
	want := int32(1)
	base.wait(t, "suspended coroutines dropped", func() string {
		return leakCounters(deferred, want)
	})
}

// leakYieldOuter yields to the scope of an enclosing continuation.
//
//go:noinline
func leakYieldOuter(outer *scope.Scope) {
	continuation.Yield(outer)
}

// TestLeakNestedDropped drops continuations suspended by a yield from a
// nested continuation (two levels, or three) to the outermost scope: all
// are reclaimed, the innermost body's deferred calls first.
func TestLeakNestedDropped(t *testing.T) {
	base := leakStart(".leakYieldOuter(")
	const n = 200
	var mu sync.Mutex
	order := make([][]string, n)
	note := func(i int, what string) {
		mu.Lock()
		defer mu.Unlock()
		order[i] = append(order[i], what)
	}
	levels := func(i int) int { return 2 + i%2 }
	var handles atomic.Int32
	func() {
		for i := range n {
			outerS := scope.New("outer")
			// body returns the body of the continuation at level l, which
			// runs the next level or, at the last, yields to outerS.
			var body func(l int) func()
			body = func(l int) func() {
				return func() {
					defer note(i, "level "+strconv.Itoa(l))
					if l == levels(i)-1 {
						leakYieldOuter(outerS) // suspends every level
						t.Errorf("innermost body %d resumed after it was dropped", i)
						return
					}
					inner := continuation.New(scope.New("inner"), body(l+1))
					runtime.AddCleanup(inner, func(h *atomic.Int32) { h.Add(1) }, &handles)
					inner.Run()
					t.Errorf("body %d at level %d resumed after it was dropped", i, l)
				}
			}
			outer := continuation.New(outerS, body(0))
			runtime.AddCleanup(outer, func(h *atomic.Int32) { h.Add(1) }, &handles)
			outer.Run()
			if outer.IsDone() {
				t.Fatalf("outer %d is done, want it suspended", i)
			}
		}
	}()
	wantHandles := int32(0)
	for i := range n {
		wantHandles += int32(levels(i))
	}
	base.wait(t, "nested suspended continuations dropped", func() string {
		if h := handles.Load(); h != wantHandles {
			return fmt.Sprintf("%d of %d handles collected", h, wantHandles)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, o := range order {
			var want []string
			for l := levels(i) - 1; l >= 0; l-- {
				want = append(want, "level "+strconv.Itoa(l))
			}
			if !slices.Equal(o, want) {
				return fmt.Sprintf("nest %d: deferred calls ran as %q, want %q", i, o, want)
			}
		}
		return ""
	})
}

// TestLeakNestedPullDropped drops a Pull whose seq pulls from another
// Pull and stops it in a deferred call: both are reclaimed.
func TestLeakNestedPullDropped(t *testing.T) {
	base := leakStart(".leakSeq(")
	const n = 100
	started := make([]atomic.Int32, n)
	innerDeferred := make([]atomic.Int32, n)
	outerDeferred := make([]atomic.Int32, n)
	func() {
		for i := range n {
			next, _ := continuation.Pull(func(yield func(int) bool) {
				defer outerDeferred[i].Add(1)
				in, stop := continuation.Pull(func(y func(int) bool) {
					leakSeq(&started[i], &innerDeferred[i], y)
				})
				defer stop()
				for {
					v, ok := in()
					if !ok || !yield(v) {
						return
					}
				}
			})
			for j := range 2 {
				if v, ok := next(); !ok || v != j {
					t.Fatalf("pull %d: next = %d, %v; want %d, true", i, v, ok, j)
				}
			}
		}
	}()
	// The outer seq unwinds, and its deferred stop ends the inner one.
	want := int32(1)
	base.wait(t, "a Pull nested in a dropped Pull", func() string {
		if p := leakCounters(outerDeferred, want); p != "" {
			return "outer: " + p
		}
		return leakCounters(innerDeferred, want)
	})
}

// TestLeakNestedHeldDropped: the inner continuation is suspended on its
// own scope and its handle is held by the outer body, which is suspended
// and dropped. Dropping the outer makes the inner unreachable too.
func TestLeakNestedHeldDropped(t *testing.T) {
	base := leakStart(".leakFrames(")
	outerMarked := len(leakStacks(".leakYieldOuter("))
	const n = 200
	outerDeferred := make([]atomic.Int32, n)
	innerDeferred := make([]atomic.Int32, n)
	var handles atomic.Int32
	func() {
		for i := range n {
			outerS := scope.New("outer")
			outer := continuation.New(outerS, func() {
				defer outerDeferred[i].Add(1)
				innerS := scope.New("inner")
				inner := continuation.New(innerS, func() {
					defer innerDeferred[i].Add(1)
					leakFrames(innerS, 2, 2)
				})
				runtime.AddCleanup(inner, func(h *atomic.Int32) { h.Add(1) }, &handles)
				inner.Run() // suspended on its own scope
				leakYieldOuter(outerS)
				inner.Run() // keeps inner live across the yield
				t.Errorf("outer body %d resumed after it was dropped", i)
			})
			runtime.AddCleanup(outer, func(h *atomic.Int32) { h.Add(1) }, &handles)
			outer.Run()
		}
	}()
	want := int32(1)
	base.wait(t, "an outer continuation holding a suspended inner one dropped", func() string {
		if h := handles.Load(); h != 2*n {
			return fmt.Sprintf("%d of %d handles collected", h, 2*n)
		}
		if p := leakCounters(outerDeferred, want); p != "" {
			return "outer: " + p
		}
		if p := leakCounters(innerDeferred, want); p != "" {
			return "inner: " + p
		}
		return ""
	})
	if n := len(leakStacks(".leakYieldOuter(")); n > outerMarked {
		t.Fatalf("%d goroutines still run leakYieldOuter, %d at the start", n, outerMarked)
	}
}

func TestLeakPanicked(t *testing.T) {
	base := leakStart(".leakFrames(")
	const n = 500
	deferred := make([]atomic.Int32, n)
	for i := range n {
		s := scope.New("panics")
		c := continuation.New(s, func() {
			defer deferred[i].Add(1)
			leakFrames(s, i%5, i%3)
			panic(i)
		})
		var got any
		func() {
			defer func() { got = recover() }()
			for !c.IsDone() {
				c.Run()
			}
		}()
		if got != any(i) || !c.IsDone() {
			t.Fatalf("continuation %d: Run panicked with %v, IsDone %v; want %d, true", i, got, c.IsDone(), i)
		}
		if d := deferred[i].Load(); d != 1 {
			t.Fatalf("continuation %d: deferred call ran %d times, want 1", i, d)
		}
	}
	base.wait(t, "continuations that panicked", nil)
}

func TestLeakGoexit(t *testing.T) {
	base := leakStart(".leakFrames(")
	const n = 100
	deferred := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for i := range n {
		s := scope.New("goexit")
		c := continuation.New(s, func() {
			defer deferred[i].Add(1)
			leakFrames(s, 3, i%2)
			runtime.Goexit()
		})
		returned := false
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !c.IsDone() {
				c.Run()
			}
			returned = true
		}()
		wg.Wait()
		if returned || !c.IsDone() || deferred[i].Load() != 1 {
			t.Fatalf("continuation %d after runtime.Goexit in its body: Run returned %v, IsDone %v, deferred calls %d; want false, true, 1",
				i, returned, c.IsDone(), deferred[i].Load())
		}
	}
	base.wait(t, "continuations that called runtime.Goexit", nil)
}

// gcNode is a heap object with pointers, scalars, a string, a slice, a map
// and an interface, all derived from its index and a seed so that they can
// be checked bit for bit.
type gcNode struct {
	i       int
	next    *gcNode
	skip    *gcNode
	name    string
	payload []byte
	words   [5]uint64
	m       map[int]*gcNode
	iface   any
}

func gcWord(seed uint64, i, j int) uint64 {
	return diffMix(seed, uint64(i*8+j))
}

// gcBuild makes a list of n nodes referenced only from the result.
func gcBuild(seed uint64, n int) *gcNode {
	nodes := make([]*gcNode, n)
	for i := range nodes {
		x := &gcNode{i: i, name: "node-" + strconv.Itoa(i) + "-" + strconv.FormatUint(seed%1000, 10)}
		x.payload = make([]byte, 16+i%64)
		for j := range x.payload {
			x.payload[j] = byte(gcWord(seed, i, j))
		}
		for j := range x.words {
			x.words[j] = gcWord(seed, i, j+100)
		}
		x.iface = &[2]uint64{gcWord(seed, i, 200), gcWord(seed, i, 201)}
		nodes[i] = x
	}
	for i, x := range nodes {
		if i+1 < n {
			x.next = nodes[i+1]
		}
		x.skip = nodes[(i*7+3)%n]
		if i%3 == 0 {
			x.m = map[int]*gcNode{i: x, -1: nodes[(i+n/2)%n]}
		}
	}
	return nodes[0]
}

// gcCheck verifies every node of the list bit for bit and returns a
// description of the first difference.
func gcCheck(seed uint64, head *gcNode, n int) string {
	byIndex := make([]*gcNode, 0, n)
	for x := head; x != nil; x = x.next {
		byIndex = append(byIndex, x)
	}
	if len(byIndex) != n {
		return fmt.Sprintf("list has %d nodes, want %d", len(byIndex), n)
	}
	for i, x := range byIndex {
		if x.i != i || x.name != "node-"+strconv.Itoa(i)+"-"+strconv.FormatUint(seed%1000, 10) {
			return fmt.Sprintf("node %d: index %d, name %q", i, x.i, x.name)
		}
		if len(x.payload) != 16+i%64 {
			return fmt.Sprintf("node %d: payload length %d", i, len(x.payload))
		}
		for j, b := range x.payload {
			if b != byte(gcWord(seed, i, j)) {
				return fmt.Sprintf("node %d: payload byte %d is %#x, want %#x", i, j, b, byte(gcWord(seed, i, j)))
			}
		}
		for j, w := range x.words {
			if w != gcWord(seed, i, j+100) {
				return fmt.Sprintf("node %d: word %d is %#x", i, j, w)
			}
		}
		if a, ok := x.iface.(*[2]uint64); !ok || a[0] != gcWord(seed, i, 200) || a[1] != gcWord(seed, i, 201) {
			return fmt.Sprintf("node %d: interface field is %v", i, x.iface)
		}
		if x.skip != byIndex[(i*7+3)%n] {
			return fmt.Sprintf("node %d: skip pointer is wrong", i)
		}
		if i%3 == 0 && (len(x.m) != 2 || x.m[i] != x || x.m[-1] != byIndex[(i+n/2)%n]) {
			return fmt.Sprintf("node %d: map is wrong", i)
		}
		if i%3 != 0 && x.m != nil {
			return fmt.Sprintf("node %d: map should be nil", i)
		}
	}
	return ""
}

// gcGarbage allocates short-lived memory, so that memory freed by a
// collection is reused (and, with GODEBUG=clobberfree=1, clobbered first).
func gcGarbage(n int) int {
	total := 0
	for i := range n {
		b := make([]*[4]uint64, 8+i%8)
		for j := range b {
			b[j] = &[4]uint64{uint64(i), uint64(j)}
		}
		total += len(b)
	}
	return total
}

// gcDeepCheck recurses to grow the goroutine stack, then checks the list.
//
//go:noinline
func gcDeepCheck(depth int, seed uint64, head *gcNode, n int) string {
	var pad [16]uint64
	pad[depth%16] = uint64(depth)
	if depth > 0 {
		if p := gcDeepCheck(depth-1, seed, head, n); p != "" {
			return p
		}
	} else {
		return gcCheck(seed, head, n)
	}
	if pad[depth%16] != uint64(depth) {
		return "stack local changed during recursion"
	}
	return ""
}

// gcStressBody builds heap structures referenced only from its locals and
// a pointer to a stack local, and checks them after every yield.
func gcStressBody(t *testing.T, s *scope.Scope, seed uint64, rounds int) {
	const n = 200
	head := gcBuild(seed, n)
	strs := []string{strconv.Itoa(int(seed)) + "-a", strings.Repeat("b", 100+int(seed%50))}
	var stackWords [8]uint64
	p := &stackWords[seed%8]
	for r := range rounds {
		*p = uint64(r) * seed
		stackWords[(seed+1)%8] = ^uint64(r)
		continuation.Yield(s)
		problem := gcCheck(seed, head, n)
		if problem == "" && r%4 == 0 {
			problem = gcDeepCheck(200+r, seed, head, n) // grows the stack after the resume
		}
		if problem == "" && (*p != uint64(r)*seed || stackWords[(seed+1)%8] != ^uint64(r)) {
			problem = "a stack local changed across the yield"
		}
		if problem == "" && (strs[0] != strconv.Itoa(int(seed))+"-a" || strs[1] != strings.Repeat("b", 100+int(seed%50))) {
			problem = "a string changed across the yield"
		}
		if problem != "" {
			t.Errorf("seed %d, after yield %d: %s", seed, r, problem)
			return
		}
		if r%5 == 4 {
			head = gcBuild(seed, n) // new objects, and the old list becomes garbage
		}
	}
}

func TestGCStressAcrossYields(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 30
	}
	s := scope.New("gc stress")
	c := continuation.New(s, func() { gcStressBody(t, s, 12345, rounds) })
	for i := 0; !c.IsDone(); i++ {
		runtime.GC()
		gcGarbage(200)
		runtime.GC()
		if i%3 == 2 {
			done := make(chan struct{})
			go func() { defer close(done); c.Run() }()
			<-done
		} else {
			c.Run()
		}
	}
}

// TestGCStressConcurrent: several goroutines drive continuations at once,
// collecting garbage between every yield and resume, while suspended
// continuations hold their heap structures only from their locals.
func TestGCStressConcurrent(t *testing.T) {
	workers, rounds := 8, 40
	if testing.Short() {
		workers, rounds = 4, 15
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Two continuations per worker, resumed in turn, so that one is
			// always suspended while the other runs.
			seeds := []uint64{uint64(w)*2 + 1, uint64(w)*2 + 2}
			var cs []*continuation.Continuation
			for _, seed := range seeds {
				s := scope.New("gc stress " + strconv.FormatUint(seed, 10))
				cs = append(cs, continuation.New(s, func() { gcStressBody(t, s, seed, rounds) }))
			}
			for !cs[0].IsDone() || !cs[1].IsDone() {
				for _, c := range cs {
					if !c.IsDone() {
						runtime.GC()
						gcGarbage(50)
						c.Run()
					}
				}
			}
		}()
	}
	wg.Wait()
}

// gcTracked is an object whose collection a cleanup reports.
type gcTracked struct {
	words [16]uint64
	ptr   *[4]uint64
}

// gcFlushCleanups collects garbage until a cleanup registered now for a
// fresh unreachable object has run, twice: a cleanup for an object that
// was unreachable before the call has had its chance to run by then.
func gcFlushCleanups(t *testing.T) {
	t.Helper()
	for range 2 {
		var ran atomic.Bool
		func() {
			sentinel := &gcTracked{}
			runtime.AddCleanup(sentinel, func(r *atomic.Bool) { r.Store(true) }, &ran)
		}()
		if !gcPollUntil(leakPatience, ran.Load) {
			t.Fatal("the cleanup of an unreachable object never ran")
		}
	}
}

// gcTrackedBody allocates an object referenced only from its locals,
// registers a cleanup that sets collected, yields three times (checking
// the object after each) and returns.
func gcTrackedBody(t *testing.T, s *scope.Scope, collected *atomic.Bool, deferred *atomic.Int32) {
	defer deferred.Add(1)
	obj := &gcTracked{ptr: &[4]uint64{1, 2, 3, 4}}
	for i := range obj.words {
		obj.words[i] = uint64(i) * 0x0101010101010101
	}
	runtime.AddCleanup(obj, func(c *atomic.Bool) { c.Store(true) }, collected)
	for r := range 3 {
		continuation.Yield(s)
		for i, w := range obj.words {
			if w != uint64(i)*0x0101010101010101 {
				t.Errorf("after yield %d: word %d of the object is %#x", r, i, w)
			}
		}
		if *obj.ptr != [4]uint64{1, 2, 3, 4} {
			t.Errorf("after yield %d: the object's pointee is %v", r, *obj.ptr)
		}
	}
	runtime.KeepAlive(obj)
}

// TestGCKeepsSuspendedLocalsAlive: an object referenced only from a
// suspended continuation's locals stays alive while it is suspended (its
// cleanup does not run however often the collector runs), and is
// collected once the continuation has finished.
func TestGCKeepsSuspendedLocalsAlive(t *testing.T) {
	var collected atomic.Bool
	var deferred atomic.Int32
	s := scope.New("alive")
	c := continuation.New(s, func() { gcTrackedBody(t, s, &collected, &deferred) })
	for !c.IsDone() {
		c.Run()
		if c.IsDone() {
			break
		}
		gcFlushCleanups(t)
		if collected.Load() {
			t.Fatal("an object referenced only from a suspended continuation was collected")
		}
	}
	if deferred.Load() != 1 {
		t.Fatalf("deferred call ran %d times, want 1", deferred.Load())
	}
	if !gcPollUntil(leakPatience, collected.Load) {
		t.Fatal("the object was not collected after the continuation finished")
	}
}

// TestGCCollectsDroppedLocals: the same object is collected after the
// suspended continuation holding it is dropped.
func TestGCCollectsDroppedLocals(t *testing.T) {
	var collected atomic.Bool
	var deferred atomic.Int32
	var handle atomic.Bool
	func() {
		s := scope.New("dropped")
		c := continuation.New(s, func() { gcTrackedBody(t, s, &collected, &deferred) })
		runtime.AddCleanup(c, func(h *atomic.Bool) { h.Store(true) }, &handle)
		c.Run()
		c.Run()
		gcFlushCleanups(t)
		if collected.Load() {
			t.Fatal("an object referenced only from a suspended continuation was collected")
		}
		runtime.KeepAlive(c)
	}()
	if !gcPollUntil(leakPatience, func() bool { return handle.Load() && collected.Load() }) {
		t.Fatalf("after dropping the suspended continuation: handle collected %v, object collected %v; want both", handle.Load(), collected.Load())
	}
	want := int32(1)
	if !gcPollUntil(leakPatience, func() bool { return deferred.Load() == want }) {
		t.Fatalf("deferred call ran %d times, want %d", deferred.Load(), want)
	}
}

// leakTraced suspends deep enough that a StackTrace of it takes a while.
//
//go:noinline
func leakTraced(s *scope.Scope, depth int) int {
	if depth > 0 {
		return leakTraced(s, depth-1) + 1
	}
	continuation.Yield(s)
	return 0
}

// A suspended continuation whose last use is a StackTrace is reclaimed
// too. The collector could find its handle unreachable while the trace
// held the continuation's state, and the cleanup, which abandons only a
// suspended continuation, then did nothing: the body's deferred calls
// never ran (and on the portable backend its goroutine stayed); 220 of 300
// in a run like this one. The same held for a Run, between the engine's
// letting go of the handle and its marking the continuation suspended.
func TestLeakStackTraceLastUse(t *testing.T) {
	base := leakStart(".leakTraced(")
	const n = 300
	var unwound atomic.Int32
	stopGC := make(chan struct{})
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for {
			select {
			case <-stopGC:
				return
			default:
				runtime.GC()
			}
		}
	}()
	func() {
		for range n {
			s := scope.New("traced")
			c := continuation.New(s, func() {
				defer unwound.Add(1)
				leakTraced(s, 3000)
				t.Error("a dropped continuation resumed")
			})
			c.Run()
			if fr := c.StackTrace(); len(fr) < 3000 { // the handle's last use
				t.Errorf("StackTrace has %d frames, want over 3,000", len(fr))
			}
		}
	}()
	close(stopGC)
	<-gcDone
	base.wait(t, "continuations dropped after a StackTrace", func() string {
		if u := unwound.Load(); u != n {
			return fmt.Sprintf("%d of %d unwound", u, n)
		}
		return ""
	})
}
