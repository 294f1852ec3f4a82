package continuation_test

import (
	"bytes"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// Yields under reflect.Value.Call, CallSlice and Method(i).Call suspend on
// both backends. On the stack-copying backend the frames reflect puts
// between the caller and the function it calls (reflect.Value.call, the
// ABI wrapper runtime.reflectcall and a trampoline runtime.callN) are
// frozen and thawed with the others: the trampoline's own arguments point
// to Value.call's register-argument block, and its locals hold the callee's
// stack-assigned arguments and results.
//
// Each case calls a function through reflect that yields several times,
// with arguments and results of one kind, and formats what it returns.
// rflDrive runs it once plainly and once in a continuation, which it
// resumes alternately on its own goroutine and on a fresh one, collecting
// garbage between every yield and resume; the callee collects garbage and
// grows its stack after every resume too. The two runs must agree. Run
// with GOGC=1 GODEBUG=invalidptr=1,gccheckmark=1,clobberfree=1 too.

// rflCase is one reflect call that yields: run calls y at every yield point
// and returns the formatted results.
type rflCase struct {
	name string
	run  func(y func()) string
}

// rflAfterResume is what the callee does after each yield: collect, and
// grow the stack under the thawed frames.
//
//go:noinline
func rflAfterResume() {
	runtime.GC()
	rflGrow(40)
}

//go:noinline
func rflGrow(n int) int {
	var pad [32]uint64
	pad[n%32] = uint64(n)
	if n == 0 {
		return 0
	}
	return rflGrow(n-1) + int(pad[n%32])
}

// rflYield yields through y, then collects and grows the stack.
func rflYield(y func()) {
	y()
	rflAfterResume()
}

// rflStr builds a string on the heap.
//
//go:noinline
func rflStr(k int) string { return "s" + strconv.Itoa(k*7919) }

type rflPair struct {
	A int
	S string
}

// rflBig has too many words for the argument registers: it is passed on
// the stack, in the trampoline's frame.
type rflBig struct {
	A, B, C int
	F, G    float64
	S       string
	P       *int
	E       error
	Xs      []int
}

func (b rflBig) String() string {
	return fmt.Sprintf("{%d %d %d %v %v %q %d %v %v}", b.A, b.B, b.C, b.F, b.G, b.S, *b.P, b.E, b.Xs)
}

// rflAcc has methods with value and pointer receivers that yield.
type rflAcc struct {
	y    func()
	base int
	tag  string
}

func (a rflAcc) Sum(xs ...int) (int, string) {
	n := a.base
	for _, x := range xs {
		rflYield(a.y)
		n += x
	}
	return n, a.tag + "/" + strconv.Itoa(len(xs))
}

func (a *rflAcc) Add(k int, s string) *rflAcc {
	rflYield(a.y)
	a.base += k
	rflYield(a.y)
	a.tag += s
	return a
}

func (a rflAcc) String() string {
	rflYield(a.y)
	s := a.tag + "=" + strconv.Itoa(a.base)
	rflYield(a.y)
	return s
}

// rflMany has more arguments and results of each class than there are
// registers (9 integer, 15 floating-point), so some are stack-assigned.
func rflMany(y func(), a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 int,
	f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16 float64,
	s string, p *int) (r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10 int, g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13, g14, g15 float64, rs string, rp *int) {
	rflYield(y)
	ints := []int{a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11}
	fs := []float64{f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16}
	rflYield(y)
	sum, fsum := 0, 0.0
	for i, v := range ints {
		sum += v * (i + 1)
	}
	for i, v := range fs {
		fsum += v * float64(i+1)
	}
	*p += sum
	rflYield(y)
	return sum, a0, a1, a2, a3, a4, a5, a6, a7, a8, a11,
		fsum, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f16,
		s + strconv.Itoa(sum), p
}

func rflShowValues(vs []reflect.Value) string {
	var b strings.Builder
	for _, v := range vs {
		switch v.Kind() {
		case reflect.Pointer:
			fmt.Fprintf(&b, "&%v ", v.Elem().Interface())
		case reflect.Func:
			fmt.Fprintf(&b, "func:%v ", v.IsNil())
		default:
			fmt.Fprintf(&b, "%v ", v.Interface())
		}
	}
	return b.String()
}

var rflCases = []rflCase{
	{"ints", func(y func()) string {
		f := func(a int, b int8, c uint64, d uintptr) (int, uint64) {
			rflYield(y)
			r := a*3 + int(b)
			rflYield(y)
			return r, c ^ uint64(d)
		}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{
			reflect.ValueOf(41), reflect.ValueOf(int8(-5)), reflect.ValueOf(uint64(1 << 60)), reflect.ValueOf(uintptr(77)),
		}))
	}},
	{"floats", func(y func()) string {
		f := func(x float64, z float32, w complex128) (float64, float32, complex128) {
			rflYield(y)
			rflYield(y)
			return x * 2, z / 3, w * w
		}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{
			reflect.ValueOf(math.Pi), reflect.ValueOf(float32(2.5)), reflect.ValueOf(complex(1.5, -2)),
		}))
	}},
	{"strings", func(y func()) string {
		f := func(s, t string) (string, int) {
			rflYield(y)
			u := s + "+" + t
			rflYield(y)
			return strings.ToUpper(u), len(u)
		}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf(rflStr(3)), reflect.ValueOf(rflStr(4))}))
	}},
	{"slices", func(y func()) string {
		f := func(xs []int, bs []byte) ([]int, []byte) {
			rflYield(y)
			out := append([]int(nil), xs...)
			for i := range out {
				out[i] *= 2
			}
			rflYield(y)
			return out, bytes.ToUpper(bs)
		}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf([]int{1, 2, 3}), reflect.ValueOf([]byte(rflStr(5)))}))
	}},
	{"interfaces", func(y func()) string {
		f := func(e any, st fmt.Stringer, err error) (any, error) {
			rflYield(y)
			rflYield(y)
			return fmt.Sprint(e, st), fmt.Errorf("wrapped: %w", err)
		}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{
			reflect.ValueOf(any(rflPair{7, rflStr(7)})), reflect.ValueOf(rflBig{P: new(int), S: rflStr(1)}), reflect.ValueOf(errors.New(rflStr(9))),
		}))
	}},
	{"pointers", func(y func()) string {
		f := func(p *int, q *rflPair, m map[string]int, ch chan int) (*int, *rflPair) {
			rflYield(y)
			*p += 5
			q.S += "!"
			m["k"]++
			ch <- *p
			rflYield(y)
			return p, q
		}
		n := 10
		m := map[string]int{"k": 1}
		ch := make(chan int, 1)
		out := reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf(&n), reflect.ValueOf(&rflPair{1, rflStr(1)}), reflect.ValueOf(m), reflect.ValueOf(ch)})
		return rflShowValues(out) + fmt.Sprint(n, m["k"], <-ch)
	}},
	{"structs and arrays", func(y func()) string {
		f := func(p rflPair, b rflBig, a [3]int, sa [2]string) (rflBig, [3]int, rflPair) {
			rflYield(y)
			b.A += p.A
			b.Xs = append(b.Xs, a[:]...)
			*b.P += a[2]
			rflYield(y)
			a[0] = len(sa[0] + sa[1])
			rflYield(y)
			return b, a, rflPair{p.A * 2, p.S + sa[1]}
		}
		k := 100
		b := rflBig{1, 2, 3, 1.5, -2.5, rflStr(2), &k, errors.New("e"), []int{9}}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{
			reflect.ValueOf(rflPair{3, rflStr(3)}), reflect.ValueOf(b), reflect.ValueOf([3]int{4, 5, 6}), reflect.ValueOf([2]string{rflStr(8), rflStr(9)}),
		}))
	}},
	{"many arguments", func(y func()) string {
		in := []reflect.Value{reflect.ValueOf(y)}
		for i := range 12 {
			in = append(in, reflect.ValueOf(i*i+1))
		}
		for i := range 17 {
			in = append(in, reflect.ValueOf(float64(i)+0.25))
		}
		k := 1000
		in = append(in, reflect.ValueOf(rflStr(6)), reflect.ValueOf(&k))
		return rflShowValues(reflect.ValueOf(rflMany).Call(in))
	}},
	{"variadic CallSlice", func(y func()) string {
		f := func(prefix string, xs ...int) (string, int) {
			n := 0
			for _, x := range xs {
				rflYield(y)
				n += x
			}
			return prefix + strconv.Itoa(n), len(xs)
		}
		v := reflect.ValueOf(f)
		a := v.CallSlice([]reflect.Value{reflect.ValueOf(rflStr(1)), reflect.ValueOf([]int{1, 2, 3})})
		b := v.Call([]reflect.Value{reflect.ValueOf(rflStr(2)), reflect.ValueOf(4), reflect.ValueOf(5)})
		return rflShowValues(a) + rflShowValues(b)
	}},
	{"methods", func(y func()) string {
		acc := &rflAcc{y: y, base: 5, tag: rflStr(4)}
		m, _ := reflect.TypeOf(*acc).MethodByName("Sum")
		sum := reflect.ValueOf(*acc).Method(m.Index)
		a := sum.Call([]reflect.Value{reflect.ValueOf(1), reflect.ValueOf(2)})
		b := reflect.ValueOf(acc).MethodByName("Add").Call([]reflect.Value{reflect.ValueOf(7), reflect.ValueOf("x")})
		var st fmt.Stringer = *acc
		c := reflect.ValueOf(&st).Elem().Method(0).Call(nil) // through the interface
		d := reflect.ValueOf(*acc).MethodByName("Sum").CallSlice([]reflect.Value{reflect.ValueOf([]int{10, 20})})
		return rflShowValues(a) + fmt.Sprint(b[0].Elem().Field(1).Int(), b[0].Elem().Field(2).String()) + rflShowValues(c) + rflShowValues(d)
	}},
	{"closures", func(y func()) string {
		count, label := 0, rflStr(11)
		f := func(k int) string {
			for range k {
				rflYield(y)
				count++
				label += "."
			}
			return label
		}
		out := reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf(3)})
		return rflShowValues(out) + strconv.Itoa(count)
	}},
	{"nested", func(y func()) string {
		var f func(d int, s string) (string, int)
		f = func(d int, s string) (string, int) {
			rflYield(y)
			if d == 0 {
				return s, 0
			}
			out := reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf(d - 1), reflect.ValueOf(s + strconv.Itoa(d))})
			rflYield(y)
			return out[0].String() + "<", int(out[1].Int()) + d
		}
		return rflShowValues(reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf(4), reflect.ValueOf(rflStr(1))}))
	}},
}

// rflDrive runs run plainly, then in a continuation, and checks that they
// agree, that every yield suspended, and that nothing pinned.
func rflDrive(t *testing.T, name string, run func(y func()) string) {
	t.Helper()
	plainYields := 0
	want := run(func() { plainYields++ })
	if plainYields == 0 {
		t.Fatalf("%s: the plain run did not yield", name)
	}
	s := scope.New(name)
	var got string
	yields := 0
	c := continuation.New(s, func() {
		got = run(func() {
			if !continuation.Yield(s) {
				t.Errorf("%s: yield %d returned false", name, yields)
			}
			yields++
		})
	}, continuation.WithOnPinned(func(_ *continuation.Continuation, r pinning.Reason) {
		t.Errorf("%s: yield %d pinned: %v", name, yields, r)
	}))
	for i := 0; !c.IsDone(); i++ {
		if i%2 == 1 {
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.Run()
			}()
			<-done
		} else {
			c.Run()
		}
		runtime.GC()
	}
	if got != want {
		t.Errorf("%s: the continuation run returned\n\t%s\nthe plain run\n\t%s", name, got, want)
	}
	st := c.Stats()
	if yields != plainYields || st.Yields != uint64(plainYields) || st.Pinned != 0 {
		t.Errorf("%s: %d yields returned, Stats %+v; want %d yields, none pinned", name, yields, st, plainYields)
	}
	if gcsStackCopy() && (st.FramesFrozen == 0 || st.FramesThawed == 0) {
		t.Errorf("%s: Stats %+v: no frames frozen or thawed", name, st)
	}
}

func TestReflectCallYields(t *testing.T) {
	for _, c := range rflCases {
		t.Run(c.name, func(t *testing.T) { rflDrive(t, c.name, c.run) })
	}
}

// rflDeep yields from under k frames of its own.
//
//go:noinline
func rflDeep(y func(), k int, s string) string {
	if k == 0 {
		rflYield(y)
		return s
	}
	return rflDeep(y, k-1, s+strconv.Itoa(k)) + "."
}

// TestReflectCallRecordBoundaries: the callee, with arguments and results
// on the stack, yields from k frames further down, for k from 0 to 11. So
// a lazy thaw's record boundaries fall at every frame from the callee to
// Value.call's caller: the callee returns into the return barrier with its
// stack results, and the trampoline is thawed under it.
func TestReflectCallRecordBoundaries(t *testing.T) {
	for k := range 12 {
		t.Run(strconv.Itoa(k), func(t *testing.T) {
			rflDrive(t, "depth "+strconv.Itoa(k), func(y func()) string {
				// 96 bytes of stack-assigned arguments and results: few
				// enough for the callee to end a record (arch.MaxRecordArgs).
				f := func(a [3]int, s string) ([2]string, [3]int) {
					u := rflDeep(y, k, s)
					v := rflDeep(y, k, u+strconv.Itoa(a[0]))
					return [2]string{u, v}, [3]int{a[2], a[1], len(v)}
				}
				out := reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf([3]int{k, 2, 3}), reflect.ValueOf(rflStr(k))})
				return rflShowValues(out)
			})
		})
	}
}

// rflItem is a template's data: its methods yield.
type rflItem struct {
	y    func()
	Name string
	N    int
}

func (it rflItem) Double(k int) (int, error) {
	rflYield(it.y)
	return 2 * (it.N + k), nil
}

func (it *rflItem) Tag() string {
	rflYield(it.y)
	return "<" + it.Name + ">"
}

// rflTemplateData returns a template's data and funcs, which yield.
func rflTemplateData(y func()) (map[string]any, map[string]any) {
	items := []*rflItem{{y, rflStr(1), 1}, {y, "b&c", 2}, {y, rflStr(3), 3}}
	funcs := map[string]any{
		"yf": func(s string, n int) (string, error) {
			rflYield(y)
			return strings.Repeat(s[:1], n), nil
		},
		"join": func(sep string, xs ...string) string {
			rflYield(y)
			return strings.Join(xs, sep)
		},
	}
	return map[string]any{"Items": items, "Title": rflStr(42)}, funcs
}

const rflTemplateText = `{{.Title}}:{{range $i, $it := .Items}}[{{$i}} {{yf $it.Name $it.N}} {{$it.Double 10}} {{$it.Tag}} {{join "," $it.Name "z"}}]{{end}}`

// TestReflectTemplateYields: text/template and html/template call funcs
// and methods through reflect.Value.Call; those that yield suspend.
func TestReflectTemplateYields(t *testing.T) {
	t.Run("text/template", func(t *testing.T) {
		rflDrive(t, "text/template", func(y func()) string {
			data, funcs := rflTemplateData(y)
			tm := template.Must(template.New("t").Funcs(funcs).Parse(rflTemplateText))
			var b strings.Builder
			if err := tm.Execute(&b, data); err != nil {
				return "error: " + err.Error()
			}
			return b.String()
		})
	})
	t.Run("html/template", func(t *testing.T) {
		rflDrive(t, "html/template", func(y func()) string {
			data, funcs := rflTemplateData(y)
			tm := htmltemplate.Must(htmltemplate.New("t").Funcs(funcs).Parse("<p title=\"{{.Title}}\">" + rflTemplateText + "</p>"))
			var b strings.Builder
			if err := tm.Execute(&b, data); err != nil {
				return "error: " + err.Error()
			}
			return b.String()
		})
	})
}

// TestReflectCallStackTrace: a continuation suspended under
// reflect.Value.Call shows reflect's frames in StackTrace as a goroutine's
// traceback does: reflect.Value.Call and reflect.Value.call, without the
// wrapper runtime.reflectcall and the trampoline runtime.callN.
func TestReflectCallStackTrace(t *testing.T) {
	s := scope.New(t.Name())
	c := continuation.New(s, func() {
		reflect.ValueOf(func() { continuation.Yield(s) }).Call(nil)
	})
	c.Run()
	var names []string
	for _, f := range c.StackTrace() {
		names = append(names, f.Function)
	}
	c.Run()
	all := strings.Join(names, " ")
	if !strings.Contains(all, "reflect.Value.call reflect.Value.Call") || strings.Contains(all, "runtime.") {
		t.Errorf("StackTrace: %v", names)
	}
	if !c.IsDone() {
		t.Errorf("the continuation did not finish")
	}
}
