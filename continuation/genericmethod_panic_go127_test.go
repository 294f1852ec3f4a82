//go:build go1.27

package continuation_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// Generic methods (Go 1.27) in continuation bodies with deferred calls,
// panics and recover across yields: frames of shape-instantiated generic
// methods, their open-coded defers (some of which are themselves generic
// method calls, or method values of generic methods), recover in a
// generic method deferred directly, and a nested panic raised by one,
// frozen and thawed lazily, compared with the same program run plainly.

type gpLog struct {
	inCont bool
	s      *scope.Scope
	lines  []string
	pinned int
}

func (l *gpLog) add(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *gpLog) yield() {
	if l.inCont && !continuation.Yield(l.s) {
		l.pinned++
	}
}

type gpBox[A any] struct {
	l   *gpLog
	val A
}

// note logs from a deferred call: a generic method deferred directly.
//
//go:noinline
func (b *gpBox[A]) note[B any](d int, extra B) {
	b.l.add("defer %d %v %v", d, b.val, extra)
}

// rescue recovers: deferred directly, so recover stops the panic.
//
//go:noinline
func (b *gpBox[A]) rescue[B comparable](d int, res *int, tag B) {
	if r := recover(); r != nil {
		b.l.add("recovered %v at %d (%v)", r, d, tag)
		*res = -1
	}
}

// again panics while a panic runs (a nested panic).
//
//go:noinline
func (b gpBox[A]) again[B any](d int, v B) {
	panic(fmt.Sprintf("again at %d: %v", d, v))
}

// walk recurses; levels every apart defer note, level recAt defers
// rescue, level againAt defers again (a method value of a generic
// method), and the bottom yields and then panics.
//
//go:noinline
func (b *gpBox[A]) walk[B fmt.Stringer](d, every, recAt, againAt int, mk func(int) B) (res int) {
	held := mk(d)
	want := held.String()
	if d%every == 0 {
		defer b.note(d, held)
	}
	if d == recAt {
		defer b.rescue(d, &res, want)
	}
	if d == againAt {
		f := gpBox[[2]int]{l: b.l, val: [2]int{d, d}}.again[string]
		defer f(d, want)
	}
	if d == 0 {
		b.l.yield()
		b.l.yield()
		b.l.add("bottom")
		panic(fmt.Sprintf("bottom of %T", b.val))
	}
	r := b.walk(d-1, every, recAt, againAt, mk)
	if r == -1 {
		b.l.yield()
		b.l.add("resumed after recovery at %d", d)
	}
	if held.String() != want {
		b.l.add("value at %d changed: %q != %q", d, held.String(), want)
	}
	return r + d
}

type gpName struct{ s *string }

func (n gpName) String() string { return *n.s }

func gpMk(d int) gpName {
	s := fmt.Sprintf("n%d", d)
	return gpName{&s}
}

func TestGenericMethodPanics(t *testing.T) {
	for _, depth := range []int{1, 9, 30, 100} {
		for _, every := range []int{1, 3} {
			for _, k := range []struct{ recAt, againAt int }{
				{depth, -1}, {depth - 1, 0}, {depth, depth / 2}, {depth / 2, depth / 2}, {-1, depth / 3},
			} {
				name := fmt.Sprintf("depth=%d/every=%d/rec=%d/again=%d", depth, every, k.recAt, k.againAt)
				run := func(inCont bool) (*gpLog, int, any) {
					l := &gpLog{inCont: inCont, s: scope.New("gp")}
					var ret int
					var escaped any
					done := make(chan struct{})
					go func() {
						defer close(done)
						defer func() { escaped = recover() }()
						str := "payload"
						box := &gpBox[*string]{l: l, val: &str}
						body := func() { ret = box.walk(depth, every, k.recAt, k.againAt, gpMk) }
						if !inCont {
							body()
							return
						}
						c := continuation.New(l.s, body)
						for i := 0; !c.IsDone(); i++ {
							runtime.GC()
							if i%2 == 0 {
								c.Run()
							} else {
								diffRunElsewhere(c)
							}
						}
					}()
					<-done
					// The box's *string prints as an address: drop it.
					for i, s := range l.lines {
						if strings.HasPrefix(s, "defer ") {
							f := strings.Fields(s)
							l.lines[i] = strings.Join(append(f[:2:2], f[3:]...), " ")
						}
					}
					return l, ret, escaped
				}
				want, wantRet, wantEsc := run(false)
				got, gotRet, gotEsc := run(true)
				if !slices.Equal(got.lines, want.lines) || gotRet != wantRet || fmt.Sprint(gotEsc) != fmt.Sprint(wantEsc) {
					t.Errorf("%s: in a continuation returned %d, escaped %v:\n\t%s\nplain returned %d, escaped %v:\n\t%s",
						name, gotRet, gotEsc, strings.Join(got.lines, "\n\t"), wantRet, wantEsc, strings.Join(want.lines, "\n\t"))
				}
				if got.pinned != 0 {
					t.Errorf("%s: %d yields pinned", name, got.pinned)
				}
			}
		}
	}
}
