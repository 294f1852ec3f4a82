package continuation_test

// The backend-independent specification of package continuation, modelled on
// the tests of Project Loom's jdk.internal.vm.Continuation. Every test here
// asserts only the documented contract, so the suite runs unchanged on every
// backend (WEFT_BACKEND=portable forces the portable one).
//
// Writing rules for this file, so that it stays valid for the stack-copying
// backend too: a body that yields never has a defer inside a loop (a heap
// defer record pins) and never yields from a deferred call run by a panic
// (a panic in progress pins); neither is what these tests are about.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// recoverPanic calls f and returns the value it panicked with, if it did.
func recoverPanic(f func()) (v any, panicked bool) {
	normal := false
	defer func() {
		if !normal {
			v, panicked = recover(), true
		}
	}()
	f()
	normal = true
	return nil, false
}

// ---------------------------------------------------------------------------
// Drivers: where each Run happens.

// runner runs c once (one call to Run) somewhere and returns when that Run
// has returned. A panic from Run is re-raised on the calling goroutine.
type runner func(c *continuation.Continuation)

// sameGoroutine runs every Run on the calling goroutine.
func sameGoroutine(c *continuation.Continuation) { c.Run() }

// newGoroutine runs every Run on a goroutine of its own.
func newGoroutine(c *continuation.Continuation) {
	var (
		p        any
		panicked bool
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		p, panicked = recoverPanic(c.Run)
	}()
	<-done
	if panicked {
		panic(p)
	}
}

// goroutinePool returns a runner that hands successive Runs to a pool of
// worker goroutines in turn, so that consecutive Runs of one continuation
// happen on different goroutines. The pool ends with the test.
func goroutinePool(t testing.TB, workers int) runner {
	jobs := make([]chan func(), workers)
	for i := range jobs {
		jobs[i] = make(chan func())
		go func(in chan func()) {
			for job := range in {
				job()
			}
		}(jobs[i])
	}
	t.Cleanup(func() {
		for _, ch := range jobs {
			close(ch)
		}
	})
	var next atomic.Uint64
	return func(c *continuation.Continuation) {
		var (
			p        any
			panicked bool
			done     = make(chan struct{})
		)
		jobs[next.Add(1)%uint64(workers)] <- func() {
			defer close(done)
			p, panicked = recoverPanic(c.Run)
		}
		<-done
		if panicked {
			panic(p)
		}
	}
}

type driver struct {
	name string
	new  func(t testing.TB) runner
}

var drivers = []driver{
	{"same-goroutine", func(testing.TB) runner { return sameGoroutine }},
	{"goroutine-per-run", func(testing.TB) runner { return newGoroutine }},
	{"goroutine-pool", func(t testing.TB) runner { return goroutinePool(t, 3) }},
}

// runToEnd runs c with run until it is done, calling between (if not nil)
// after every Run that left c suspended, and returns how many did.
func runToEnd(c *continuation.Continuation, run runner, between func()) (suspensions int) {
	for {
		run(c)
		if c.IsDone() {
			return suspensions
		}
		suspensions++
		if between != nil {
			between()
		}
	}
}

// ---------------------------------------------------------------------------
// Yield in a loop.

func TestBackend(t *testing.T) {
	b := continuation.Backend()
	t.Logf("backend: %s", b)
	if b == "" {
		t.Fatal("Backend() is empty")
	}
}

func TestYieldLoop(t *testing.T) {
	for _, n := range []int{0, 1, 2, 100, 10_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := scope.New("loop")
			var (
				step     = -1
				sum      int
				finished bool
			)
			c := continuation.New(s, func() {
				acc := 0
				for i := 0; i < n; i++ {
					acc += i
					step = i
					if !continuation.Yield(s) {
						t.Errorf("Yield returned false at step %d", i)
						return
					}
					if want := i * (i + 1) / 2; acc != want {
						t.Errorf("after resume %d: acc = %d, want %d", i, acc, want)
						return
					}
				}
				sum = acc
				finished = true
			})
			if c.IsDone() {
				t.Fatal("IsDone before the first Run")
			}
			if c.Scope() != s {
				t.Fatal("Scope() is not the scope New was given")
			}
			for i := 0; i < n; i++ {
				c.Run()
				if c.IsDone() {
					t.Fatalf("done after %d runs, want %d yields first", i+1, n)
				}
				if step != i {
					t.Fatalf("run %d: body reported step %d", i, step)
				}
			}
			c.Run()
			if !c.IsDone() || !finished {
				t.Fatalf("not done after %d runs (IsDone %v, finished %v)", n+1, c.IsDone(), finished)
			}
			if want := n * (n - 1) / 2; sum != want {
				t.Fatalf("sum = %d, want %d", sum, want)
			}
			st := c.Stats()
			if st.Runs != uint64(n+1) || st.Yields != uint64(n) || st.Pinned != 0 {
				t.Fatalf("Stats = %+v, want Runs %d Yields %d Pinned 0", st, n+1, n)
			}
		})
	}
}

// TestInterleaved runs several continuations round-robin: each keeps its own
// state across its own yields, whatever the others do in between.
func TestInterleaved(t *testing.T) {
	const conts, steps = 16, 200
	s := scope.New("interleaved")
	out := make([]int, conts)
	cs := make([]*continuation.Continuation, conts)
	for k := range cs {
		cs[k] = continuation.New(s, func() {
			x := k * 1000
			for i := 0; i < steps; i++ {
				out[k] = x + i
				continuation.Yield(s)
				if x != k*1000 {
					t.Errorf("continuation %d: local changed to %d", k, x)
				}
			}
			out[k] = -1
		})
	}
	for i := 0; i < steps; i++ {
		for k, c := range cs {
			c.Run()
			if c.IsDone() || out[k] != k*1000+i {
				t.Fatalf("step %d continuation %d: done %v out %d", i, k, c.IsDone(), out[k])
			}
		}
	}
	for k, c := range cs {
		c.Run()
		if !c.IsDone() || out[k] != -1 {
			t.Fatalf("continuation %d did not finish", k)
		}
	}
}

// ---------------------------------------------------------------------------
// Deep recursion.

type recState struct {
	depth, every int
	yield        func()
	report       []int // points reached: n on the way down, -n-1 on the way up
	bad          int
}

func mix64(n uint64) uint64 {
	n ^= n >> 33
	n *= 0xff51afd7ed558ccd
	n ^= n >> 33
	return n
}

//go:noinline
func recurse(st *recState, n int) uint64 {
	v := mix64(uint64(n)) // computed on the way down
	local := [4]uint64{v, v + 1, v + 2, v + 3}
	p := &local[2] // pointer into this frame
	name := "frame-" + strconv.Itoa(n)
	if n%st.every == 0 {
		st.report = append(st.report, n)
		st.yield()
	}
	var sub uint64
	if n+1 < st.depth {
		sub = recurse(st, n+1)
	}
	*p += sub
	if n%st.every == 0 {
		st.report = append(st.report, -n-1)
		st.yield()
	}
	// checked on the way up
	if local[0] != mix64(uint64(n)) || local[1] != v+1 || local[2] != v+2+sub || local[3] != v+3 ||
		name != "frame-"+strconv.Itoa(n) {
		st.bad++
	}
	return v ^ (sub * 31)
}

func TestDeepRecursion(t *testing.T) {
	for _, tc := range []struct{ depth, every int }{
		{1_000, 1},
		{10_000, 1},
		{10_000, 97},
		{30_000, 1_000},
	} {
		t.Run(fmt.Sprintf("depth=%d/every=%d", tc.depth, tc.every), func(t *testing.T) {
			plain := &recState{depth: tc.depth, every: tc.every, yield: func() {}}
			want := recurse(plain, 0)

			s := scope.New("recursion")
			st := &recState{depth: tc.depth, every: tc.every, yield: func() {
				if !continuation.Yield(s) {
					panic("Yield returned false")
				}
			}}
			var got uint64
			c := continuation.New(s, func() { got = recurse(st, 0) })
			runs := 0
			for !c.IsDone() {
				c.Run()
				runs++
				// After every Run, the body has reported exactly the
				// points the plain call reached, in order, so far.
				if len(st.report) > len(plain.report) {
					t.Fatalf("run %d: %d points reported, plain call has %d", runs, len(st.report), len(plain.report))
				}
				if !c.IsDone() {
					i := len(st.report) - 1
					if i < 0 || st.report[i] != plain.report[i] {
						t.Fatalf("run %d: last point %v, want %d", runs, st.report[max(i, 0):], plain.report[max(i, 0)])
					}
				}
				if runs%512 == 0 {
					runtime.GC()
				}
			}
			if !slices.Equal(st.report, plain.report) {
				t.Fatalf("points differ from a plain call")
			}
			if runs != len(plain.report)+1 {
				t.Fatalf("%d runs, want %d", runs, len(plain.report)+1)
			}
			if st.bad != 0 {
				t.Fatalf("%d frames found their locals changed on the way up", st.bad)
			}
			if got != want {
				t.Fatalf("result %#x, want %#x", got, want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Many arguments and results.

type mixed struct {
	a int64
	p *int
	s string
	f float64
}

//go:noinline
func manyArgs(y func(), depth int, a int8, b uint16, c int32, d int64, e float32, f float64,
	g complex128, h string, i []byte, j *int, k bool, l uintptr, m mixed, n [3]int, o any,
	p map[string]int) (int8, uint16, int32, int64, float32, float64, complex128, string, []byte,
	*int, bool, uintptr, mixed, [3]int, any, map[string]int) {
	if depth > 0 {
		a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p = manyArgs(y, depth-1, a+1, b+1, c+1, d+1, e+1,
			f+1, g+1i, h+"+", append(i, byte(depth)), j, !k, l+1, m, n, o, p)
	}
	y()
	*j++
	p[h] = depth
	m.a++
	n[depth%3]++
	y()
	return a * 2, b * 2, c * 2, d * 2, e * 2, f * 2, g * 2, h + "!", append(i, 0xff), j, !k, l * 2,
		m, n, o, p
}

//go:noinline
func namedResults(y func(), x int, s string) (n int, str string, err error) {
	defer func() {
		// Runs after the yields, on the way out: sees and edits the results.
		n *= 10
		str += ")"
	}()
	n = x
	y()
	str = "(" + s
	y()
	n++
	if x < 0 {
		err = errors.New("negative")
	}
	return n, str, err
}

type manyResults struct {
	a    int8
	b    uint16
	c    int32
	d    int64
	e    float32
	f    float64
	g    complex128
	h    string
	i    []byte
	j    *int
	k    bool
	l    uintptr
	m    mixed
	n    [3]int
	o    any
	p    map[string]int
	n1   int
	s1   string
	err1 error
}

// callMany makes the calls above with fresh arguments; counter and heap
// are the targets of the pointer arguments.
func callMany(y func(), counter, heap *int) (r manyResults) {
	r.a, r.b, r.c, r.d, r.e, r.f, r.g, r.h, r.i, r.j, r.k, r.l, r.m, r.n, r.o, r.p = manyArgs(
		y, 3, -3, 65000, -70000, 1<<40, 1.5, math.Pi, complex(2, -3), "s", []byte{9},
		counter, true, 0xdead, mixed{a: -1, p: heap, s: "m", f: 0.25}, [3]int{4, 5, 6},
		stringerT{"iface"}, map[string]int{"k": 1})
	r.n1, r.s1, r.err1 = namedResults(y, 4, "abc")
	return r
}

func TestManyArgsAndResults(t *testing.T) {
	plainCounter, plainHeap := 100, 7
	want := callMany(func() {}, &plainCounter, &plainHeap)
	// A few values worked out by hand, to check the plain call itself.
	if want.a != 0 || want.h != "s+++!!!!" || !slices.Equal(want.i, []byte{9, 3, 2, 1, 0xff, 0xff, 0xff, 0xff}) ||
		plainCounter != 104 || want.m.a != 3 || want.n != [3]int{6, 6, 7} || want.n1 != 50 || want.s1 != "(abc)" ||
		len(want.p) != 5 {
		t.Fatalf("plain call: %+v", want)
	}
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			run := d.new(t)
			s := scope.New("args")
			counter, heap := 100, 7
			var got manyResults
			c := continuation.New(s, func() {
				got = callMany(func() {
					continuation.Yield(s)
					runtime.GC()
				}, &counter, &heap)
			})
			if n := runToEnd(c, run, runtime.GC); n != 2*4+2 {
				t.Errorf("%d suspensions, want %d", n, 2*4+2)
			}
			if got.j != &counter || got.m.p != &heap || counter != plainCounter {
				t.Errorf("pointer results: %p %p, counter %d", got.j, got.m.p, counter)
			}
			got.j, got.m.p = want.j, want.m.p
			if !reflect.DeepEqual(got, want) {
				t.Errorf("results\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Values of every kind live across a yield.

// A valueCase builds values, calls y (which yields, and collects garbage)
// several times, mutates and checks the values, and returns an error
// describing the first mismatch. Each case also runs as a plain call with a
// y that only collects garbage, which checks the case itself.
type valueCase struct {
	name string
	f    func(y func()) error
}

type listNode struct {
	val  int
	next *listNode
	tag  string
}

type counterT struct{ n int }

func (c *counterT) Inc(d int) int { c.n += d; return c.n }
func (c counterT) Get() int       { return c.n }

type stringerT struct{ s string }

func (s stringerT) String() string { return "<" + s.s + ">" }

type withPointers struct {
	name  string
	next  *withPointers
	vals  []int
	m     map[int]string
	iface any
	fn    func() int
}

type genBox[T any] struct {
	v    T
	prev *genBox[T]
}

//go:noinline
func (b *genBox[T]) swapYield(y func(), v T) T {
	old := b.v
	y()
	b.v = v
	return old
}

//go:noinline
func keepGeneric[T comparable](y func(), v T, copies int) error {
	vs := make([]T, copies)
	for i := range vs {
		vs[i] = v
	}
	local := v
	p := &local
	y()
	for i, x := range vs {
		if x != v {
			return fmt.Errorf("generic %T: vs[%d] = %v, want %v", v, i, x, v)
		}
	}
	y()
	if *p != v || local != v {
		return fmt.Errorf("generic %T: local %v, want %v", v, local, v)
	}
	return nil
}

//go:noinline
func mapGeneric[K comparable, V any](y func(), m map[K]V, f func(V) V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		y()
		out[k] = f(v)
	}
	return out
}

//go:noinline
func growStack(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return growStack(n-1) + int(pad[n%256])
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

var valueCases = []valueCase{
	{"strings", func(y func()) error {
		lit := "literal"
		heap := strings.Repeat("ab", 1000)
		sub := heap[10:20]
		var sb strings.Builder
		for i := 0; i < 100; i++ {
			sb.WriteString(strconv.Itoa(i))
		}
		built := sb.String()
		b := [8]byte{'s', 't', 'a', 'c', 'k'}
		small := string(b[:5]) // may live in a stack buffer
		y()
		concat := lit + sub + small
		y()
		if lit != "literal" || len(heap) != 2000 || strings.Count(heap, "ab") != 1000 || sub != "ababababab" ||
			built[:11] != "01234567891" || len(built) != 190 || small != "stack" ||
			concat != "literal"+"ababababab"+"stack" {
			return errorf("strings: %q %d %q %q %q", lit, len(heap), sub, small, concat)
		}
		return nil
	}},
	{"slices", func(y func()) error {
		heap := make([]int, 10_000)
		for i := range heap {
			heap[i] = i * i
		}
		stack := make([]int, 8) // does not escape
		for i := range stack {
			stack[i] = -i
		}
		sub := heap[100:200:300]
		var nilSlice []string
		nested := [][]string{{"a"}, {"b", "c"}, nil}
		y()
		sub = append(sub, 42)
		stack = append(stack[:4], 7)
		nilSlice = append(nilSlice, "x")
		y()
		for i, v := range heap {
			if i != 200 && v != i*i {
				return errorf("slices: heap[%d] = %d", i, v)
			}
		}
		if heap[200] != 42 || len(sub) != 101 || cap(sub) != 200 || !slices.Equal(stack, []int{0, -1, -2, -3, 7}) ||
			len(nilSlice) != 1 || nested[1][1] != "c" || nested[2] != nil {
			return errorf("slices: %v %v %v %v", sub[100], stack, nilSlice, nested)
		}
		return nil
	}},
	{"maps", func(y func()) error {
		small := map[int]int{1: 10, 2: 20} // may live on the stack
		big := make(map[string][]int)
		for i := 0; i < 2000; i++ {
			big[strconv.Itoa(i)] = []int{i, -i}
		}
		var structKey = map[[2]string]*listNode{{"a", "b"}: {val: 1}}
		y()
		small[3] = 30
		delete(big, "7")
		y()
		if len(small) != 3 || small[1]+small[2]+small[3] != 60 || len(big) != 1999 {
			return errorf("maps: %v %d", small, len(big))
		}
		for i := 0; i < 2000; i++ {
			v, ok := big[strconv.Itoa(i)]
			if ok != (i != 7) || ok && (v[0] != i || v[1] != -i) {
				return errorf("maps: big[%d] = %v %v", i, v, ok)
			}
		}
		if structKey[[2]string{"a", "b"}].val != 1 {
			return errorf("maps: struct key lost")
		}
		return nil
	}},
	{"interfaces", func(y func()) error {
		var i any = 42
		var s any = "str"
		var e error = errors.New("boom")
		var st fmt.Stringer = stringerT{"x"}
		var p any = &counterT{n: 5}
		var f any = 2.5
		var sl any = []int{1, 2, 3}
		var nilIface any
		var nilErr error
		y()
		if i.(int) != 42 || s.(string) != "str" || e.Error() != "boom" || st.String() != "<x>" ||
			p.(*counterT).n != 5 || f.(float64) != 2.5 || sl.([]int)[2] != 3 || nilIface != nil || nilErr != nil {
			return errorf("interfaces: %v %v %v %v %v %v %v", i, s, e, st, p, f, sl)
		}
		p.(*counterT).n++
		y()
		if p.(*counterT).Get() != 6 {
			return errorf("interfaces: pointer through interface lost its update")
		}
		return nil
	}},
	{"heap pointers", func(y func()) error {
		var head *listNode
		for i := 0; i < 1000; i++ {
			head = &listNode{val: i, next: head, tag: "n" + strconv.Itoa(i)}
		}
		big := new([1 << 16]int)
		big[1<<15] = 77
		y()
		n := 999
		for p := head; p != nil; p = p.next {
			if p.val != n || p.tag != "n"+strconv.Itoa(n) {
				return errorf("heap pointers: listNode %d has %d %q", n, p.val, p.tag)
			}
			n--
		}
		y()
		if n != -1 || big[1<<15] != 77 {
			return errorf("heap pointers: list ended at %d, big %d", n, big[1<<15])
		}
		return nil
	}},
	{"stack pointers", func(y func()) error {
		x := 1
		p := &x
		pp := &p
		arr := [8]int{1, 2, 3, 4, 5, 6, 7, 8}
		mid := &arr[3]
		type pair struct {
			a *int
			b *[8]int
		}
		pr := pair{a: &x, b: &arr}
		ppr := &pr
		y()
		*p++
		**pp++
		*mid *= 10
		y()
		*ppr.a += 100
		ppr.b[7] = -1
		y()
		if x != 103 || *p != 103 || arr != [8]int{1, 2, 3, 40, 5, 6, 7, -1} || pr.a != &x || pr.b != &arr {
			return errorf("stack pointers: x %d arr %v", x, arr)
		}
		return nil
	}},
	{"stack growth after resume", func(y func()) error {
		x := 5
		p := &x
		var buf [512]byte
		for i := range buf {
			buf[i] = byte(i)
		}
		bp := &buf[100]
		y()
		if g := growStack(5000); g != growStack(5000) || g == 0 {
			return errorf("growStack")
		}
		*p++
		*bp = 0xff
		y()
		_ = growStack(10)
		if x != 6 || buf[100] != 0xff || buf[99] != 99 || buf[511] != 255 {
			return errorf("stack growth: x %d buf[100] %d", x, buf[100])
		}
		return nil
	}},
	{"large frame", func(y func()) error {
		var big [64 << 10]byte
		for i := range big {
			big[i] = byte(i * 7)
		}
		p := &big[len(big)-1]
		y()
		*p = 1
		y()
		for i := 0; i < len(big)-1; i++ {
			if big[i] != byte(i*7) {
				return errorf("large frame: big[%d] = %d", i, big[i])
			}
		}
		if big[len(big)-1] != 1 {
			return errorf("large frame: last byte not written through pointer")
		}
		return nil
	}},
	{"arrays", func(y func()) error {
		ints := [64]int{}
		for i := range ints {
			ints[i] = i * 3
		}
		strs := [4]string{"a", "bb", strings.Repeat("c", 100), ""}
		sls := [3][]int{{1}, {2, 2}, nil}
		ptrs := [3]*listNode{{val: 1}, nil, {val: 3}}
		grid := [3][3]float64{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
		y()
		strs[3] = "d"
		sls[2] = append(sls[2], 3)
		y()
		for i, v := range ints {
			if v != i*3 {
				return errorf("arrays: ints[%d] = %d", i, v)
			}
		}
		if strs != [4]string{"a", "bb", strings.Repeat("c", 100), "d"} || sls[1][1] != 2 || sls[2][0] != 3 ||
			ptrs[0].val != 1 || ptrs[1] != nil || ptrs[2].val != 3 || grid[2][1] != 8 {
			return errorf("arrays: %v %v %v", strs, sls, grid)
		}
		return nil
	}},
	{"structs with pointers", func(y func()) error {
		leaf := &withPointers{name: "leaf", vals: []int{1}, m: map[int]string{1: "one"}}
		local := withPointers{name: "root", next: leaf, vals: make([]int, 3), iface: leaf,
			fn: func() int { return len(leaf.name) }}
		lp := &local
		y()
		lp.vals[1] = 9
		leaf.m[2] = "two"
		y()
		if local.name != "root" || local.next != leaf || local.vals[1] != 9 || local.iface.(*withPointers) != leaf ||
			local.fn() != 4 || leaf.m[1] != "one" || leaf.m[2] != "two" || local.next.vals[0] != 1 {
			return errorf("structs: %+v", local)
		}
		return nil
	}},
	{"closures", func(y func()) error {
		x := 0
		inc := func() { x++ } // captures x by reference
		s := "cap"
		get := func() string { return s + strconv.Itoa(x) }
		mk := func(base int) func() int {
			n := base
			return func() int { n++; return n }
		}
		gen := mk(100)
		y()
		inc()
		inc()
		gen()
		y()
		x += 10
		s = "pac"
		if got := get(); got != "pac12" {
			return errorf("closures: get() = %q", got)
		}
		y()
		if gen() != 102 || x != 12 {
			return errorf("closures: x %d", x)
		}
		return nil
	}},
	{"generics", func(y func()) error {
		if err := keepGeneric(y, 42, 3); err != nil {
			return err
		}
		if err := keepGeneric(y, "generic string", 3); err != nil {
			return err
		}
		n := &listNode{val: 5}
		if err := keepGeneric(y, n, 3); err != nil {
			return err
		}
		if err := keepGeneric(y, mixed{a: 1, s: "x", f: 2}, 2); err != nil {
			return err
		}
		if err := keepGeneric[any](y, 3.5, 2); err != nil {
			return err
		}
		b := &genBox[[]string]{v: []string{"a"}}
		b2 := &genBox[[]string]{v: []string{"b"}, prev: b}
		old := b2.swapYield(y, []string{"c", "d"})
		if old[0] != "b" || b2.v[1] != "d" || b2.prev.v[0] != "a" {
			return errorf("generics: genBox %v %v", old, b2.v)
		}
		m := mapGeneric(y, map[string]int{"a": 1, "b": 2, "c": 3}, func(v int) int { return v * v })
		if len(m) != 3 || m["a"] != 1 || m["b"] != 4 || m["c"] != 9 {
			return errorf("generics: mapGeneric %v", m)
		}
		return nil
	}},
	{"method values", func(y func()) error {
		c := &counterT{n: 1}
		inc := c.Inc // bound to the pointer
		get := c.Get // bound to a copy of *c, taken now
		var s fmt.Stringer = stringerT{"m"}
		str := s.String         // interface method value
		expr := (*counterT).Inc // method expression
		y()
		inc(2)
		y()
		expr(c, 3)
		if c.n != 6 || get() != 1 || str() != "<m>" || inc(0) != 6 {
			return errorf("method values: n %d get %d str %q", c.n, get(), str())
		}
		return nil
	}},
	{"channels", func(y func()) error {
		ch := make(chan int, 4)
		ch <- 1
		ch <- 2
		chch := make(chan chan string, 1)
		inner := make(chan string, 1)
		chch <- inner
		var nilCh chan int
		y()
		ch <- 3
		(<-chch) <- "via"
		y()
		got := []int{<-ch, <-ch, <-ch}
		if !slices.Equal(got, []int{1, 2, 3}) || <-inner != "via" || len(ch) != 0 || nilCh != nil || cap(ch) != 4 {
			return errorf("channels: %v", got)
		}
		close(ch)
		if _, ok := <-ch; ok {
			return errorf("channels: closed channel delivered a value")
		}
		return nil
	}},
	{"funcs", func(y func()) error {
		fs := []func(int) int{
			func(x int) int { return x + 1 },
			func(x int) int { return x * 2 },
		}
		byName := map[string]func(int) int{"sq": func(x int) int { return x * x }}
		var nilFn func()
		y()
		r := 3
		for _, f := range fs {
			r = f(r)
		}
		y()
		if r != 8 || byName["sq"](r) != 64 || nilFn != nil {
			return errorf("funcs: r %d", r)
		}
		return nil
	}},
	{"floats and complex", func(y func()) error {
		f32 := float32(1.0) / 3
		f64 := math.Sqrt(2)
		negZero := math.Copysign(0, -1)
		nan := math.NaN()
		inf := math.Inf(-1)
		c64 := complex64(complex(1.25, -2.5))
		c128 := complex(math.Pi, math.E)
		vals := [4]float64{0.1, 0.2, 0.3, 1e300}
		y()
		sum := f64 * f64
		y()
		if f32 != float32(1.0)/3 || f64 != math.Sqrt(2) || math.Float64bits(negZero) != 1<<63 ||
			!math.IsNaN(nan) || !math.IsInf(inf, -1) || c64 != complex64(complex(1.25, -2.5)) ||
			c128 != complex(math.Pi, math.E) || math.Abs(sum-2) > 1e-15 || vals[3] != 1e300 ||
			vals != [4]float64{0.1, 0.2, 0.3, 1e300} {
			return errorf("floats: %v %v %v %v %v", f32, f64, c64, c128, sum)
		}
		return nil
	}},
	{"big numbers", func(y func()) error {
		a := new(big.Int).Lsh(big.NewInt(1), 4000)
		b := new(big.Int).Sub(a, big.NewInt(1))
		y()
		c := new(big.Int).Add(b, big.NewInt(1))
		y()
		if c.Cmp(a) != 0 || a.BitLen() != 4001 {
			return errorf("big numbers differ")
		}
		return nil
	}},
}

func TestValuesLiveAcrossYield(t *testing.T) {
	for _, vc := range valueCases {
		t.Run(vc.name, func(t *testing.T) {
			if err := vc.f(runtime.GC); err != nil {
				t.Fatalf("plain call: %v", err)
			}
			for _, d := range drivers {
				t.Run(d.name, func(t *testing.T) {
					run := d.new(t)
					s := scope.New("values")
					var err error
					yields := 0
					c := continuation.New(s, func() {
						err = vc.f(func() {
							if !continuation.Yield(s) {
								panic("Yield returned false")
							}
							yields++
							runtime.GC()
						})
					})
					n := runToEnd(c, run, runtime.GC)
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 || n != yields {
						t.Fatalf("%d suspensions, body counted %d resumes", n, yields)
					}
				})
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Panics, recover, defers, Goexit.

type panicStruct struct {
	code int
	msg  string
}

var errSentinel = errors.New("sentinel")

func TestPanicPropagates(t *testing.T) {
	wrapped := fmt.Errorf("wrapped: %w", errSentinel)
	ptr := &panicStruct{1, "ptr"}
	values := []struct {
		name string
		v    any
	}{
		{"string", "boom"},
		{"int", 42},
		{"error", errSentinel},
		{"wrapped error", wrapped},
		{"struct", panicStruct{7, "seven"}},
		{"pointer", ptr},
	}
	for _, pv := range values {
		for _, yieldsFirst := range []int{0, 1, 5} {
			for _, d := range drivers {
				t.Run(fmt.Sprintf("%s/yields=%d/%s", pv.name, yieldsFirst, d.name), func(t *testing.T) {
					run := d.new(t)
					s := scope.New("panic")
					deferRan := false
					c := continuation.New(s, func() {
						defer func() { deferRan = true }()
						for i := 0; i < yieldsFirst; i++ {
							continuation.Yield(s)
						}
						panic(pv.v)
					})
					for i := 0; i < yieldsFirst; i++ {
						if p, panicked := recoverPanic(func() { run(c) }); panicked {
							t.Fatalf("Run %d panicked early with %v", i, p)
						}
						if c.IsDone() {
							t.Fatalf("done after %d runs", i+1)
						}
					}
					p, panicked := recoverPanic(func() { run(c) })
					if !panicked {
						t.Fatal("Run did not panic")
					}
					if p != pv.v {
						t.Fatalf("Run panicked with %#v, want the original %#v", p, pv.v)
					}
					if err, ok := pv.v.(error); ok {
						if !errors.Is(p.(error), errSentinel) || !errors.Is(p.(error), err) {
							t.Fatalf("recovered error %v does not match with errors.Is", p)
						}
					}
					if !deferRan {
						t.Fatal("body's deferred call did not run")
					}
					if !c.IsDone() {
						t.Fatal("IsDone false after the body panicked")
					}
					if c.StackTrace() != nil {
						t.Fatal("StackTrace of a done continuation is not nil")
					}
					mustPanicWith(t, continuation.ErrDone, c.Run)
				})
			}
		}
	}
}

func TestPanicRuntimeError(t *testing.T) {
	s := scope.New("runtime-error")
	c := continuation.New(s, func() {
		var xs []int
		continuation.Yield(s)
		_ = xs[len(xs)+3]
	})
	c.Run()
	p, panicked := recoverPanic(c.Run)
	re, ok := p.(runtime.Error)
	if !panicked || !ok || !strings.Contains(re.Error(), "index out of range") {
		t.Fatalf("Run panicked %v with %#v, want a runtime.Error for an index out of range", panicked, p)
	}
	if !c.IsDone() {
		t.Fatal("not done")
	}
}

func TestPanicNil(t *testing.T) {
	s := scope.New("panic-nil")
	c := continuation.New(s, func() {
		continuation.Yield(s)
		panic(nil)
	})
	c.Run()
	p, panicked := recoverPanic(c.Run)
	var pe *runtime.PanicNilError
	if err, ok := p.(error); !panicked || !ok || !errors.As(err, &pe) {
		t.Fatalf("Run panicked %v with %#v, want *runtime.PanicNilError as for a plain panic(nil)", panicked, p)
	}
	if !c.IsDone() {
		t.Fatal("not done")
	}
}

func TestRecoverAfterYield(t *testing.T) {
	s := scope.New("recover")
	var recovered any
	c := continuation.New(s, func() {
		defer func() {
			recovered = recover()
		}()
		continuation.Yield(s)
		continuation.Yield(s)
		panic("late")
	})
	c.Run()
	c.Run()
	if p, panicked := recoverPanic(c.Run); panicked {
		t.Fatalf("Run panicked with %v although the body recovered", p)
	}
	if recovered != "late" || !c.IsDone() {
		t.Fatalf("recovered %v, done %v", recovered, c.IsDone())
	}
	if st := c.Stats(); st.Runs != 3 || st.Yields != 2 {
		t.Fatalf("Stats %+v", st)
	}
}

// TestRecoverThenYield: a panic swallowed by defer+recover inside the body
// leaves the body free to go on yielding.
func TestRecoverThenYield(t *testing.T) {
	s := scope.New("swallow")
	var log []string
	swallow := func(i int) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("recovered %v", r)
			}
		}()
		log = append(log, "call"+strconv.Itoa(i))
		continuation.Yield(s) // a yield before the panic, in the frame that recovers
		panic(i)
	}
	c := continuation.New(s, func() {
		for i := 0; i < 3; i++ {
			err := swallow(i)
			log = append(log, err.Error())
			continuation.Yield(s)
		}
		log = append(log, "end")
	})
	if n := runToEnd(c, sameGoroutine, nil); n != 6 {
		t.Fatalf("%d suspensions, want 6", n)
	}
	want := []string{"call0", "recovered 0", "call1", "recovered 1", "call2", "recovered 2", "end"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %q, want %q", log, want)
	}
}

// deferScenario exercises defers across yields. Run plainly with a y that
// only logs, and inside a continuation with a y that also yields, it must
// log exactly the same.
func deferScenario(log *[]string, y func(string)) (result int) {
	add := func(s string) { *log = append(*log, s) }
	defer func() { add("outer defer 1, result " + strconv.Itoa(result)); result++ }()
	defer add("outer defer 2")
	y("before inner")
	result = func() (r int) {
		defer add("inner defer")
		defer func() {
			if p := recover(); p != nil {
				add(fmt.Sprint("inner recovered ", p))
				r = -1
			}
		}()
		y("inner before panic")
		func() {
			defer add("innermost defer")
			y("innermost")
			panic("inner panic")
		}()
		return 1
	}()
	y("after inner")
	defer func() {
		add("deferred yield start")
		y("inside deferred call")
		add("deferred yield end")
	}()
	y("end of body")
	return result * 10
}

func countPrefix(log []string, prefix string) (n int) {
	for _, e := range log {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func TestDefersAsPlainCall(t *testing.T) {
	var plain []string
	plainResult := deferScenario(&plain, func(at string) { plain = append(plain, "y: "+at) })

	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			run := d.new(t)
			s := scope.New("defers")
			var got []string
			var result int
			c := continuation.New(s, func() {
				result = deferScenario(&got, func(at string) {
					got = append(got, "y: "+at)
					continuation.Yield(s)
				})
			})
			n := runToEnd(c, run, func() {
				got = append(got, "-- resumed --")
				runtime.GC()
			})
			// Remove the driver's markers and check they sat right after each yield.
			var clean []string
			for i, e := range got {
				if e == "-- resumed --" {
					if i == 0 || !strings.HasPrefix(got[i-1], "y: ") {
						t.Fatalf("suspension not at a yield point: %q", got[:i+1])
					}
					continue
				}
				clean = append(clean, e)
			}
			if want := countPrefix(plain, "y: "); n != want {
				t.Errorf("%d suspensions, want %d", n, want)
			}
			if !slices.Equal(clean, plain) || result != plainResult {
				t.Fatalf("continuation log\n%q\nresult %d; plain call log\n%q\nresult %d", clean, result, plain, plainResult)
			}
		})
	}
}

func TestGoexit(t *testing.T) {
	for _, yieldsFirst := range []int{0, 3} {
		for _, d := range drivers {
			t.Run(fmt.Sprintf("yields=%d/%s", yieldsFirst, d.name), func(t *testing.T) {
				run := d.new(t)
				s := scope.New("goexit")
				var log []string
				c := continuation.New(s, func() {
					defer func() { log = append(log, "body defer") }()
					for i := 0; i < yieldsFirst; i++ {
						continuation.Yield(s)
					}
					runtime.Goexit()
				})
				for i := 0; i < yieldsFirst; i++ {
					run(c)
				}
				if c.IsDone() {
					t.Fatal("done before Goexit")
				}
				// The Run that meets Goexit runs on a goroutine of its own,
				// which Goexit must end after its deferred calls run.
				done := make(chan struct{})
				returned := false
				go func() {
					defer close(done)
					defer func() {
						log = append(log, fmt.Sprintf("caller defer, recover() = %v", recover()))
					}()
					c.Run()
					returned = true
				}()
				<-done
				want := []string{"body defer", "caller defer, recover() = <nil>"}
				if returned || !slices.Equal(log, want) {
					t.Fatalf("Run returned %v; log %q, want %q", returned, log, want)
				}
				if !c.IsDone() {
					t.Fatal("not done after Goexit")
				}
				mustPanicWith(t, continuation.ErrDone, c.Run)
			})
		}
	}
}

// ---------------------------------------------------------------------------
// Nested scopes.

// eventTrail is a log shared by the bodies of nested continuations.
type eventTrail struct{ log []string }

func (e *eventTrail) add(format string, args ...any) {
	e.log = append(e.log, fmt.Sprintf(format, args...))
}

func (e *eventTrail) check(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(e.log, want) {
		t.Fatalf("events\n%q\nwant\n%q", e.log, want)
	}
	e.log = nil
}

func TestNestedYieldToInner(t *testing.T) {
	so, si := scope.New("outer"), scope.New("inner")
	var ev eventTrail
	inner := continuation.New(si, func() {
		ev.add("inner 1")
		continuation.Yield(si)
		ev.add("inner 2")
	})
	outer := continuation.New(so, func() {
		ev.add("outer 1")
		inner.Run()
		ev.add("outer: inner returned, done %v", inner.IsDone())
		continuation.Yield(so)
		inner.Run()
		ev.add("outer: inner returned, done %v", inner.IsDone())
	})
	outer.Run()
	ev.check(t, "outer 1", "inner 1", "outer: inner returned, done false")
	if outer.IsDone() || inner.IsDone() {
		t.Fatal("done too early")
	}
	outer.Run()
	ev.check(t, "inner 2", "outer: inner returned, done true")
	if !outer.IsDone() || !inner.IsDone() {
		t.Fatal("not done")
	}
}

func TestNestedYieldToOuter(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			run := d.new(t)
			so, si := scope.New("outer"), scope.New("inner")
			var ev eventTrail
			var outer, inner *continuation.Continuation
			inner = continuation.New(si, func() {
				x := 10
				p := &x
				ev.add("inner start")
				continuation.Yield(so) // suspends inner and outer
				*p++
				ev.add("inner resumed, x %d", x)
				continuation.Yield(si) // suspends inner only
				ev.add("inner end")
			})
			outer = continuation.New(so, func() {
				ev.add("outer start")
				inner.Run()
				ev.add("outer: inner.Run returned, inner done %v", inner.IsDone())
				continuation.Yield(so)
				inner.Run()
				ev.add("outer: inner.Run returned, inner done %v", inner.IsDone())
			})
			run(outer)
			// outer.Run returned; the inner Run, in outer's body, has not.
			ev.check(t, "outer start", "inner start")
			if outer.IsDone() || inner.IsDone() {
				t.Fatal("done too early")
			}
			mustPanicWith(t, continuation.ErrMounted, inner.Run)
			if continuation.Current(so) != nil || continuation.Current(si) != nil {
				t.Fatal("Current on the driver's goroutine is not nil")
			}
			runtime.GC()
			run(outer) // resumes inner exactly where it was
			ev.check(t, "inner resumed, x 11", "outer: inner.Run returned, inner done false")
			run(outer)
			ev.check(t, "inner end", "outer: inner.Run returned, inner done true")
			if !outer.IsDone() || !inner.IsDone() {
				t.Fatal("not done")
			}
			if so, si := outer.Stats(), inner.Stats(); so.Yields != 2 || si.Yields != 2 || so.Runs != 3 {
				t.Fatalf("Stats outer %+v inner %+v; want outer Runs 3 Yields 2, inner Yields 2", so, si)
			}
		})
	}
}

func TestNestedThreeLevels(t *testing.T) {
	sa, sb, sc := scope.New("A"), scope.New("B"), scope.New("C")
	var ev eventTrail
	var a, b, c *continuation.Continuation
	checkCurrent := func(where string, wa, wb, wc *continuation.Continuation) {
		if continuation.Current(sa) != wa || continuation.Current(sb) != wb || continuation.Current(sc) != wc {
			t.Errorf("%s: Current = %v %v %v", where, continuation.Current(sa), continuation.Current(sb), continuation.Current(sc))
		}
	}
	c = continuation.New(sc, func() {
		checkCurrent("c", a, b, c)
		ev.add("c1")
		continuation.Yield(sc) // to b's body
		checkCurrent("c after yield to C", a, b, c)
		ev.add("c2")
		continuation.Yield(sa) // suspends c, b and a
		checkCurrent("c after yield to A", a, b, c)
		ev.add("c3")
		continuation.Yield(sb) // suspends c and b
		ev.add("c4")
	})
	b = continuation.New(sb, func() {
		checkCurrent("b", a, b, nil)
		ev.add("b1")
		c.Run()
		checkCurrent("b after c", a, b, nil)
		ev.add("b: c returned")
		c.Run()
		ev.add("b: c returned, done %v", c.IsDone())
	})
	a = continuation.New(sa, func() {
		checkCurrent("a", a, nil, nil)
		ev.add("a1")
		b.Run()
		ev.add("a: b returned, done %v", b.IsDone())
		continuation.Yield(sa)
		b.Run()
		ev.add("a: b returned, done %v", b.IsDone())
	})
	checkCurrent("driver", nil, nil, nil)
	a.Run()
	ev.check(t, "a1", "b1", "c1", "b: c returned", "c2")
	for _, x := range []*continuation.Continuation{b, c} {
		mustPanicWith(t, continuation.ErrMounted, x.Run)
	}
	a.Run()
	ev.check(t, "c3", "a: b returned, done false")
	a.Run()
	ev.check(t, "c4", "b: c returned, done true", "a: b returned, done true")
	if !a.IsDone() || !b.IsDone() || !c.IsDone() {
		t.Fatal("not all done")
	}
	if ya, yb, yc := a.Stats().Yields, b.Stats().Yields, c.Stats().Yields; ya != 2 || yb != 2 || yc != 3 {
		t.Fatalf("Yields a %d b %d c %d, want 2 2 3", ya, yb, yc)
	}
}

// TestNestedSameScope: with one scope at two levels, Yield(s) suspends the
// innermost continuation of s only.
func TestNestedSameScope(t *testing.T) {
	s, mid := scope.New("same"), scope.New("mid")
	var ev eventTrail
	var outer, middle, inner *continuation.Continuation
	inner = continuation.New(s, func() {
		if continuation.Current(s) != inner || continuation.Current(mid) != middle {
			t.Error("inner: Current(s) is not inner, or Current(mid) is not middle")
		}
		ev.add("inner 1")
		continuation.Yield(s) // innermost of s: inner only
		ev.add("inner 2")
		continuation.Yield(mid) // suspends inner and middle, not outer
		ev.add("inner 3")
	})
	middle = continuation.New(mid, func() {
		if continuation.Current(s) != outer {
			t.Error("middle: Current(s) is not outer")
		}
		inner.Run()
		ev.add("middle: inner returned")
		continuation.Yield(s) // the innermost mounted continuation of s is now outer
		ev.add("middle resumed")
		inner.Run()
		ev.add("middle: inner returned, done %v", inner.IsDone())
	})
	outer = continuation.New(s, func() {
		middle.Run()
		ev.add("outer: middle returned")
		continuation.Yield(s)
		middle.Run()
		ev.add("outer: middle returned, done %v", middle.IsDone())
	})
	outer.Run()
	ev.check(t, "inner 1", "middle: inner returned")
	outer.Run()
	ev.check(t, "middle resumed", "inner 2", "outer: middle returned")
	outer.Run()
	ev.check(t, "inner 3", "middle: inner returned, done true", "outer: middle returned, done true")
	if !outer.IsDone() || !middle.IsDone() || !inner.IsDone() {
		t.Fatal("not done")
	}
}

// TestNestedChangesParent: a continuation suspended to its own scope is
// resumed later inside another continuation's body, where it can yield to
// that one's scope, and later still on its own again.
func TestNestedChangesParent(t *testing.T) {
	so, si := scope.New("outer"), scope.New("inner")
	var ev eventTrail
	var outer, inner *continuation.Continuation
	inner = continuation.New(si, func() {
		ev.add("inner 1, outer mounted %v", continuation.Current(so) != nil)
		continuation.Yield(si)
		ev.add("inner 2, outer mounted %v", continuation.Current(so) == outer)
		continuation.Yield(so) // suspends outer too
		ev.add("inner 3")
		continuation.Yield(si)
		ev.add("inner 4, outer mounted %v", continuation.Current(so) != nil)
	})
	outer = continuation.New(so, func() {
		inner.Run()
		ev.add("outer: inner returned")
		inner.Run()
		ev.add("outer: inner returned")
	})
	inner.Run() // first on its own
	ev.check(t, "inner 1, outer mounted false")
	outer.Run() // then inside outer
	ev.check(t, "inner 2, outer mounted true")
	outer.Run()
	ev.check(t, "inner 3", "outer: inner returned", "inner 4, outer mounted true", "outer: inner returned")
	if !outer.IsDone() || !inner.IsDone() {
		t.Fatal("not done")
	}

	// And the other way round: from inside outer to on its own.
	so2, si2 := scope.New("outer2"), scope.New("inner2")
	var inner2 *continuation.Continuation
	inner2 = continuation.New(si2, func() {
		ev.add("inner2 1, outer mounted %v", continuation.Current(so2) != nil)
		continuation.Yield(si2)
		ev.add("inner2 2, outer mounted %v", continuation.Current(so2) != nil)
		_, problem := panicsWith(continuation.ErrNotInScope, func() { continuation.Yield(so2) })
		ev.add("inner2: yield to outer2 refused %v", problem == "")
	})
	outer2 := continuation.New(so2, func() { inner2.Run() })
	outer2.Run()
	if !outer2.IsDone() || inner2.IsDone() {
		t.Fatalf("outer2 done %v, inner2 done %v", outer2.IsDone(), inner2.IsDone())
	}
	inner2.Run()
	ev.check(t, "inner2 1, outer mounted true", "inner2 2, outer mounted false", "inner2: yield to outer2 refused true")
	if !inner2.IsDone() {
		t.Fatal("inner2 not done")
	}
}

// TestNestedPanic: a panic in an inner body propagates through the inner Run
// into the outer body and, unrecovered, out of the outer Run.
func TestNestedPanic(t *testing.T) {
	so, si := scope.New("outer"), scope.New("inner")
	innerDefer, outerDefer := false, false
	inner := continuation.New(si, func() {
		defer func() { innerDefer = true }()
		continuation.Yield(so)
		panic(errSentinel)
	})
	outer := continuation.New(so, func() {
		defer func() { outerDefer = true }()
		inner.Run()
		t.Error("inner.Run returned after the inner body panicked")
	})
	outer.Run()
	p, panicked := recoverPanic(outer.Run)
	if !panicked || p != errSentinel {
		t.Fatalf("outer.Run panicked %v with %v, want %v", panicked, p, errSentinel)
	}
	if !innerDefer || !outerDefer || !inner.IsDone() || !outer.IsDone() {
		t.Fatalf("defers %v %v, done %v %v", innerDefer, outerDefer, inner.IsDone(), outer.IsDone())
	}
}

// TestNestedRecoverInOuter: the outer body can recover a panic from the
// inner Run and go on yielding.
func TestNestedRecoverInOuter(t *testing.T) {
	so, si := scope.New("outer"), scope.New("inner")
	inner := continuation.New(si, func() {
		continuation.Yield(so)
		panic("inner")
	})
	var got any
	outer := continuation.New(so, func() {
		p, _ := recoverPanic(inner.Run)
		got = p
		continuation.Yield(so)
	})
	if n := runToEnd(outer, sameGoroutine, nil); n != 2 || got != "inner" || !inner.IsDone() {
		t.Fatalf("suspensions %d, recovered %v, inner done %v", n, got, inner.IsDone())
	}
}

// ---------------------------------------------------------------------------
// Resuming on other goroutines.

func TestResumeOnManyGoroutines(t *testing.T) {
	const conts, steps = 64, 50
	for _, d := range drivers[1:] {
		t.Run(d.name, func(t *testing.T) {
			run := d.new(t)
			s := scope.New("migrate")
			cs := make([]*continuation.Continuation, conts)
			seen := make([]int, conts)
			for k := range cs {
				cs[k] = continuation.New(s, func() {
					self := continuation.Current(s)
					local := [3]int{k, k * k, -k}
					p := &local[1]
					for i := 0; i < steps; i++ {
						*p += i
						seen[k] = i
						continuation.Yield(s)
						if continuation.Current(s) != self {
							t.Errorf("continuation %d: Current changed after resume", k)
						}
					}
					if local != [3]int{k, k*k + steps*(steps-1)/2, -k} {
						t.Errorf("continuation %d: local %v", k, local)
					}
					seen[k] = -1
				})
			}
			// Round-robin, and on several goroutines at once.
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i <= steps; i++ {
						for k := g; k < conts; k += 4 {
							run(cs[k])
							if i == steps {
								if seen[k] != -1 || !cs[k].IsDone() {
									t.Errorf("continuation %d: not finished", k)
								}
							} else if seen[k] != i || cs[k].IsDone() {
								t.Errorf("continuation %d step %d: saw %d", k, i, seen[k])
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// ---------------------------------------------------------------------------
// Many suspended continuations.

// manyChildEnv marks the process TestManySuspended starts to do the work.
const manyChildEnv = "WEFT_SPEC_MANY_SUSPENDED_CHILD"

// TestManySuspended suspends 100,000 continuations at once and resumes them
// all to completion. It runs in a process of its own (the test binary,
// started again for this test only, with the same environment and so the
// same backend): on the portable backend each continuation is a goroutine,
// and the runtime keeps every goroutine it has ever created on a list that
// each garbage collection walks, which would slow every later test in this
// process down.
func TestManySuspended(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 suspended continuations: skipped in -short mode")
	}
	if os.Getenv(manyChildEnv) == "1" {
		manySuspended(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestManySuspended$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), manyChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestManySuspended")) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "spec_test.go") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func manySuspended(t *testing.T) {
	n := 100_000
	if raceEnabled() {
		// Scaled down under -race: the race detector's shadow memory for
		// the portable backend's 100,000 goroutines takes the process to
		// about 2.5 GB resident and 12 s; 20,000 stays well under both.
		n = 20_000
	}
	s := scope.New("many")
	results := make([]uint64, n)
	cs := make([]*continuation.Continuation, n)
	for i := range cs {
		cs[i] = continuation.New(s, func() {
			v := mix64(uint64(i))
			name := strconv.Itoa(i)
			arr := [2]uint64{v, uint64(i)}
			continuation.Yield(s)
			if arr[0] != mix64(uint64(i)) || arr[1] != uint64(i) || name != strconv.Itoa(i) {
				results[i] = 0
				return
			}
			continuation.Yield(s)
			results[i] = v ^ uint64(len(name))
		})
	}
	for _, c := range cs {
		c.Run()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d continuations suspended at once: %d MiB obtained from the OS", n, ms.Sys>>20)
	runtime.GC()
	for _, c := range cs {
		c.Run()
	}
	for i, c := range cs {
		c.Run()
		if !c.IsDone() {
			t.Fatalf("continuation %d not done after 3 runs", i)
		}
	}
	for i, r := range results {
		if want := mix64(uint64(i)) ^ uint64(len(strconv.Itoa(i))); r != want {
			t.Fatalf("continuation %d: result %#x, want %#x", i, r, want)
		}
	}
}

// ---------------------------------------------------------------------------
// Pinning.

//go:noinline
func yieldInCriticalSection(s *scope.Scope) (ok bool) {
	pinning.Do(func() {
		ok = continuation.Yield(s)
	})
	return ok
}

func TestPinnedDefaultHandler(t *testing.T) {
	s := scope.New("pinned-default")
	after := false
	c := continuation.New(s, func() {
		continuation.Yield(s) // not pinned
		yieldInCriticalSection(s)
		after = true
	})
	c.Run()
	p, panicked := recoverPanic(c.Run)
	if !panicked {
		t.Fatal("a yield inside pinning.Do did not panic with the default handler")
	}
	err, ok := p.(error)
	var pe *pinning.Error
	if !ok || !errors.As(err, &pe) || !errors.Is(err, pinning.ErrPinned) {
		t.Fatalf("panicked with %#v, want a *pinning.Error", p)
	}
	if pe.Reason != pinning.CriticalSection {
		t.Errorf("Reason %v, want %v", pe.Reason, pinning.CriticalSection)
	}
	if pe.Scope != s.Name() {
		t.Errorf("Scope %q, want %q", pe.Scope, s.Name())
	}
	if !strings.HasSuffix(pe.Frame.Function, ".yieldInCriticalSection") {
		t.Errorf("Frame.Function %q, want the caller of Do, yieldInCriticalSection", pe.Frame.Function)
	}
	if !strings.Contains(pe.Error(), "pinning.Do") || !strings.Contains(pe.Error(), s.Name()) {
		t.Errorf("message %q does not name the reason and the scope", pe.Error())
	}
	if after || !c.IsDone() {
		t.Fatalf("the body went on (%v) or the continuation is not done (%v)", after, c.IsDone())
	}
}

func TestPinnedWithHandler(t *testing.T) {
	s := scope.New("pinned-handler")
	var (
		calls   int
		gotC    *continuation.Continuation
		reason  pinning.Reason
		results []bool
	)
	var c *continuation.Continuation
	c = continuation.New(s, func() {
		results = append(results, continuation.Yield(s))
		results = append(results, yieldInCriticalSection(s))
		pinning.Do(func() {
			pinning.Do(func() { // nested critical sections
				results = append(results, continuation.Yield(s))
			})
			results = append(results, continuation.Yield(s))
		})
		results = append(results, continuation.Yield(s)) // critical section over
	}, continuation.WithOnPinned(func(h *continuation.Continuation, r pinning.Reason) {
		calls++
		gotC, reason = h, r
		if continuation.Current(s) != h {
			t.Error("handler: Current(s) is not the continuation")
		}
	}))
	n := runToEnd(c, sameGoroutine, nil)
	if n != 2 || !slices.Equal(results, []bool{true, false, false, false, true}) {
		t.Fatalf("%d suspensions, Yield results %v", n, results)
	}
	if calls != 3 || gotC != c || reason != pinning.CriticalSection {
		t.Fatalf("handler called %d times with %v, %v", calls, gotC == c, reason)
	}
	if st := c.Stats(); st.Pinned != 3 || st.Yields != 2 || st.Runs != 3 {
		t.Fatalf("Stats %+v, want Pinned 3 Yields 2 Runs 3", st)
	}
}

// TestPinnedNested: a continuation run inside pinning.Do can yield to its own
// scope, since Do's frame is not in what that yield suspends; a yield from
// it to an outer scope, whose region does contain Do's frame, is pinned.
func TestPinnedNested(t *testing.T) {
	so, si := scope.New("outer"), scope.New("inner")
	var (
		ev          eventTrail
		outerPinned []pinning.Reason
		innerPinned int
	)
	inner := continuation.New(si, func() {
		ev.add("inner yield to inner: %v", continuation.Yield(si))
		ev.add("inner yield to outer: %v", continuation.Yield(so))
	}, continuation.WithOnPinned(func(*continuation.Continuation, pinning.Reason) { innerPinned++ }))
	outer := continuation.New(so, func() {
		pinning.Do(func() {
			inner.Run()
			ev.add("outer: inner suspended")
			inner.Run()
			ev.add("outer: inner done %v", inner.IsDone())
		})
		ev.add("outer yield: %v", continuation.Yield(so))
	}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
		outerPinned = append(outerPinned, r)
	}))
	outer.Run()
	ev.check(t, "outer: inner suspended", "inner yield to inner: true", "inner yield to outer: false",
		"outer: inner done true")
	if outer.IsDone() {
		t.Fatal("outer done before its own yield")
	}
	outer.Run()
	ev.check(t, "outer yield: true")
	if !outer.IsDone() {
		t.Fatal("outer not done")
	}
	if !slices.Equal(outerPinned, []pinning.Reason{pinning.CriticalSection}) || innerPinned != 0 {
		t.Fatalf("outer handler got %v, inner handler called %d times", outerPinned, innerPinned)
	}
	if outer.Stats().Pinned != 1 || inner.Stats().Pinned != 0 {
		t.Fatalf("Pinned: outer %d inner %d", outer.Stats().Pinned, inner.Stats().Pinned)
	}
}

func TestPinningDoOutsideContinuation(t *testing.T) {
	ran := 0
	pinning.Do(func() {
		ran++
		pinning.Do(func() { ran++ })
	})
	if ran != 2 {
		t.Fatalf("Do ran f %d times", ran)
	}
}

// ---------------------------------------------------------------------------
// StackTrace and Stats.

var yieldLine int

//go:noinline
func traceLeaf(s *scope.Scope) {
	_, _, line, _ := runtime.Caller(0)
	yieldLine = line + 2 // the line of the Yield call below
	continuation.Yield(s)
}

//go:noinline
func traceMiddle(s *scope.Scope) { traceLeaf(s) }

func frameIndex(frames []runtime.Frame, suffix string) int {
	return slices.IndexFunc(frames, func(f runtime.Frame) bool { return strings.HasSuffix(f.Function, suffix) })
}

// enginePrefix is the prefix of the names of package weft's functions,
// from one of them rather than a literal (a copy of the module under
// another path runs these tests too).
var enginePrefix = strings.TrimSuffix(runtime.FuncForPC(reflect.ValueOf(weft.NewCont).Pointer()).Name(), "NewCont")

func checkNoEngineFrames(t *testing.T, frames []runtime.Frame) {
	t.Helper()
	for _, f := range frames {
		if strings.HasPrefix(f.Function, enginePrefix) {
			t.Errorf("engine frame %s in the trace", f.Function)
		}
	}
}

func TestStackTrace(t *testing.T) {
	s := scope.New("trace")
	var c *continuation.Continuation
	var whileRunning []runtime.Frame
	runningChecked := false
	c = continuation.New(s, func() {
		whileRunning, runningChecked = c.StackTrace(), true
		traceMiddle(s)
		traceMiddle(s)
	})
	if c.StackTrace() != nil {
		t.Fatal("StackTrace of a new continuation is not nil")
	}
	c.Run()
	if !runningChecked || whileRunning != nil {
		t.Fatalf("StackTrace of a running continuation: %v", whileRunning)
	}
	for round := 0; round < 2; round++ {
		frames := c.StackTrace()
		if len(frames) < 3 {
			t.Fatalf("trace %v, want at least 3 frames", frames)
		}
		if !strings.HasSuffix(frames[0].Function, ".traceLeaf") || frames[0].Line != yieldLine {
			t.Fatalf("first frame %s:%d, want traceLeaf at line %d", frames[0].Function, frames[0].Line, yieldLine)
		}
		mid, body := frameIndex(frames, ".traceMiddle"), frameIndex(frames, ".TestStackTrace.func1")
		if mid != 1 || body != 2 {
			t.Fatalf("traceMiddle at %d, body at %d, want 1 and 2: %v", mid, body, frames)
		}
		checkNoEngineFrames(t, frames)
		// Tracing does not disturb the continuation.
		if again := c.StackTrace(); len(again) != len(frames) || again[0] != frames[0] {
			t.Fatal("a second StackTrace differs")
		}
		c.Run()
	}
	if !c.IsDone() {
		t.Fatal("not done")
	}
	if c.StackTrace() != nil {
		t.Fatal("StackTrace of a done continuation is not nil")
	}
	if st := c.Stats(); st.Runs != 3 || st.Yields != 2 || st.Pinned != 0 {
		t.Fatalf("Stats %+v", st)
	}
}

//go:noinline
func innerYieldToOuter(so *scope.Scope) { continuation.Yield(so) }

func TestStackTraceNested(t *testing.T) {
	so, si := scope.New("outer"), scope.New("inner")
	inner := continuation.New(si, func() {
		innerYieldToOuter(so)
	})
	outer := continuation.New(so, func() {
		inner.Run()
	})
	outer.Run()
	frames := outer.StackTrace()
	if len(frames) == 0 || !strings.HasSuffix(frames[0].Function, ".innerYieldToOuter") {
		t.Fatalf("outer trace does not begin with the inner frames: %v", frames)
	}
	ib, ob := frameIndex(frames, ".TestStackTraceNested.func1"), frameIndex(frames, ".TestStackTraceNested.func2")
	if ib < 1 || ob <= ib {
		t.Fatalf("inner body at %d, outer body at %d: %v", ib, ob, frames)
	}
	checkNoEngineFrames(t, frames)
	outer.Run()
	if !outer.IsDone() || !inner.IsDone() {
		t.Fatal("not done")
	}
}

// TestStackTraceTakesTurns: calls of StackTrace at once on one suspended
// continuation each return its frames; none sees nil because another
// call is reading them.
func TestStackTraceTakesTurns(t *testing.T) {
	s := scope.New("trace-turns")
	c := continuation.New(s, func() { traceMiddle(s) })
	c.Run()
	const tracers, calls = 4, 500
	var wg sync.WaitGroup
	var missed atomic.Int64
	for range tracers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if f := c.StackTrace(); len(f) == 0 || !strings.HasSuffix(f[0].Function, ".traceLeaf") {
					missed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := missed.Load(); n != 0 {
		t.Errorf("%d of %d concurrent StackTrace calls returned no trace of the suspended continuation", n, tracers*calls)
	}
	c.Run()
	if !c.IsDone() {
		t.Fatal("not done")
	}
}

// TestStackTraceConcurrent: StackTrace from other goroutines while the
// continuation is suspended and resumed.
func TestStackTraceConcurrent(t *testing.T) {
	s := scope.New("trace-concurrent")
	const steps = 300
	c := continuation.New(s, func() {
		for i := 0; i < steps; i++ {
			traceMiddle(s)
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var traced atomic.Int64
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if f := c.StackTrace(); f != nil {
					traced.Add(1)
					if !strings.HasSuffix(f[0].Function, ".traceLeaf") {
						t.Errorf("trace begins with %s", f[0].Function)
						return
					}
				}
				runtime.Gosched()
			}
		}()
	}
	n := runToEnd(c, sameGoroutine, func() { runtime.Gosched() })
	close(stop)
	wg.Wait()
	if n != steps {
		t.Fatalf("%d suspensions, want %d", n, steps)
	}
	t.Logf("%d traces taken concurrently", traced.Load())
}
