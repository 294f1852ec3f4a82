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

// Nested panics (a deferred call that panics while a panic, or a Goexit,
// runs) across the return barrier and across Run, compared with the same
// program run plainly. Go 1.27 changed how the runtime walks the stack for
// a nested panic: _panic keeps the PC and SP it is scanning, recover is
// told by the gopanic frame's SP (startSP), and a nested panic that walks
// up to where the panic it interrupts started skips ahead to where that
// one had got (go.dev/issue/77062). The stack-copying backend recovers a
// panic at its barrier and raises it again in frozen frames (frozenPanic),
// runs a Goexit's remaining deferred calls through a new host frame from
// inside a deferred call, and lets a body run inside a deferred call of a
// panic or Goexit of its caller: in each of these the panic chain holds
// records that a walk can skip ahead to. Each program also runs inside a
// deferred call of an outer panic (or Goexit) of the goroutine that
// drives it, so that every panic of the body has a link, and the walks of
// panics that escape the body cross the outer panic's gopanic frame.

// npPanic is the value of the first panic a program raises.
type npPanic struct{ at int }

func (p npPanic) String() string { return fmt.Sprintf("npPanic{%d}", p.at) }

// npProg recurses depth levels; every every-th level defers a call that
// logs. At the bottom it yields twice, then panics (or calls
// runtime.Goexit). The deferred call of level p2At panics again (nested in
// the first panic or Goexit); level recAt recovers and, if it returns (a
// recovered panic, not a Goexit), its caller yields again. Level nestAt's
// deferred call, run during the panic, drives a nested continuation to
// completion: that one recurses, yields, panics, and recovers its own
// panic at nestRec (or lets it escape the nested Run, nested again in the
// panic in flight, if that is -1).
type npProg struct {
	s       *scope.Scope
	inCont  bool
	log     []string
	depth   int
	every   int
	p2At    int
	recAt   int
	nestAt  int
	nestRec int
	goexit  bool
	after   int // yields after a recovery

	yieldFailures int
	unwinds       uint64 // the body's Stats().Unwinds
}

func (p *npProg) logf(format string, args ...any) {
	p.log = append(p.log, fmt.Sprintf(format, args...))
}

func (p *npProg) yield(s *scope.Scope) {
	if !p.inCont {
		return
	}
	if !continuation.Yield(s) {
		p.yieldFailures++
	}
}

//go:noinline
func (p *npProg) level(d int) (res int) {
	local := [4]int{d, d * 3, d * 5, d * 7}
	if d%p.every == 0 {
		defer func() { p.logf("defer %d (%d)", d, local[3]) }()
	}
	if d == p.recAt {
		defer func() {
			r := recover()
			p.logf("recover at %d: %v", d, r)
			res = -1
		}()
	}
	if d == p.nestAt {
		defer func() { p.logf("nested at %d returned %d", d, p.nested(d)) }()
	}
	if d == p.p2At {
		defer func() {
			p.logf("p2 raised at %d", d)
			panic(fmt.Sprintf("P2 from %d", d))
		}()
	}
	if d == 0 {
		p.yield(p.s)
		p.yield(p.s)
		p.logf("bottom")
		if p.goexit {
			runtime.Goexit()
		}
		panic(npPanic{d})
	}
	r := p.level(d - 1)
	if r == -1 {
		for range p.after {
			p.yield(p.s)
		}
		p.logf("after recovery at %d", d)
	}
	if local != [4]int{d, d * 3, d * 5, d * 7} {
		p.logf("locals of level %d changed: %v", d, local)
	}
	p.logf("return %d", d)
	return r + d
}

// nested runs a nested continuation (plainly in the plain run) from a
// deferred call of level at, during the panic or Goexit in flight.
func (p *npProg) nested(at int) int {
	ns := scope.New(fmt.Sprint("nested at ", at))
	ret := 0
	body := func() { ret = p.nestLevel(ns, 12) }
	if !p.inCont {
		body()
		return ret
	}
	c := continuation.New(ns, body)
	for !c.IsDone() {
		c.Run()
		runtime.GC()
	}
	return ret
}

//go:noinline
func (p *npProg) nestLevel(ns *scope.Scope, d int) (res int) {
	if d%3 == 0 {
		defer func() { p.logf("nested defer %d", d) }()
	}
	if d == p.nestRec {
		defer func() {
			p.logf("nested recover at %d: %v", d, recover())
			res = -100
		}()
	}
	if d == 0 {
		p.yield(ns)
		p.yield(ns)
		panic("P3 in nested")
	}
	r := p.nestLevel(ns, d-1)
	if r == -100 {
		p.yield(ns)
		p.logf("nested after recovery at %d", d)
	}
	return r + d
}

// run runs the program on a goroutine of its own: directly, or (outer)
// from a deferred call of a panic (or, outerGoexit, a Goexit) of that
// goroutine; with heapDefer, that deferred call has a runtime record (it
// is deferred in a loop). In a continuation, every other Run is on yet
// another goroutine. It returns the log, the result, the panic value that escaped
// the goroutine and whether the goroutine ended by Goexit.
func (p *npProg) run(outer, outerGoexit, heapDefer bool) (log []string, ret int, escaped any, exited bool) {
	done := make(chan struct{})
	exited = true
	go func() {
		defer close(done)
		func() {
			defer func() { escaped = recover() }()
			drive := func() {
				if !p.inCont {
					ret = p.level(p.depth)
					return
				}
				c := continuation.New(p.s, func() { ret = p.level(p.depth) })
				defer func() { p.unwinds = c.Stats().Unwinds }()
				for i := 0; !c.IsDone(); i++ {
					runtime.GC()
					if i%2 == 0 {
						c.Run()
					} else {
						diffRunElsewhere(c)
					}
				}
			}
			if !outer {
				drive()
				return
			}
			if heapDefer {
				// A defer in a loop has a runtime record (linked defers).
				for range 1 {
					defer drive()
				}
			} else {
				defer drive()
			}
			npRaise(outerGoexit)
		}()
		exited = false
	}()
	<-done
	return p.log, ret, escaped, exited
}

// npRaise panics (or calls runtime.Goexit) two frames down, so that the
// panic has unwound a frame before it runs the caller's deferred call.
//
//go:noinline
func npRaise(goexit bool) { npRaise2(goexit) }

//go:noinline
func npRaise2(goexit bool) {
	if goexit {
		runtime.Goexit()
	}
	panic("P0 outer")
}

func TestNestedPanicsAcrossBarrier(t *testing.T) {
	type tc struct {
		name                      string
		depth                     int
		p2At, recAt, nestAt, nRec int
		goexit                    bool
	}
	var cases []tc
	for _, depth := range []int{0, 3, 12, 40, 120} {
		third, half, last := depth/3, depth/2, max(depth-1, 0)
		cases = append(cases,
			tc{"p2-escapes", depth, third, -1, -1, -1, false},
			tc{"p2-recovered-frozen", depth, third, last, -1, -1, false},
			tc{"p2-recovered-same-frame", depth, third, third, -1, -1, false},
			tc{"p2-bottom-recovered", depth, 0, half, -1, -1, false},
			tc{"nested-recovers-own", depth, -1, last, half, 5, false},
			tc{"nested-escapes", depth, -1, last, half, -1, false},
			tc{"nested-escapes-unrecovered", depth, -1, -1, third, -1, false},
			tc{"nested-and-p2", depth, third, last, half, 7, false},
			tc{"goexit-p2-recovered", depth, third, last, -1, -1, true},
			tc{"goexit-p2-escapes", depth, third, -1, -1, -1, true},
			tc{"goexit-nested", depth, -1, last, half, -1, true},
		)
	}
	var unwinds uint64
	for _, k := range cases {
		for _, outer := range []string{"none", "panic", "goexit", "panic-linked", "goexit-linked"} {
			for _, every := range []int{1, 4} {
				name := fmt.Sprintf("%s/depth=%d/outer=%s/every=%d", k.name, k.depth, outer, every)
				mk := func(inCont bool) *npProg {
					return &npProg{s: scope.New("np"), inCont: inCont, depth: k.depth, every: every,
						p2At: k.p2At, recAt: k.recAt, nestAt: k.nestAt, nestRec: k.nRec, goexit: k.goexit, after: 2}
				}
				plain := mk(false)
				wantLog, wantRet, wantEsc, wantExit := plain.run(outer != "none", strings.HasPrefix(outer, "goexit"), strings.HasSuffix(outer, "-linked"))
				cont := mk(true)
				gotLog, gotRet, gotEsc, gotExit := cont.run(outer != "none", strings.HasPrefix(outer, "goexit"), strings.HasSuffix(outer, "-linked"))
				if !slices.Equal(gotLog, wantLog) || gotRet != wantRet || fmt.Sprint(gotEsc) != fmt.Sprint(wantEsc) || gotExit != wantExit {
					t.Errorf("%s: in a continuation: returned %d, escaped %v, Goexit %v, log:\n\t%s\nplain: returned %d, escaped %v, Goexit %v, log:\n\t%s",
						name, gotRet, gotEsc, gotExit, strings.Join(gotLog, "\n\t"), wantRet, wantEsc, wantExit, strings.Join(wantLog, "\n\t"))
				}
				if cont.yieldFailures != 0 {
					t.Errorf("%s: %d yields were pinned", name, cont.yieldFailures)
				}
				unwinds += cont.unwinds
			}
		}
	}
	t.Logf("%d panics and Goexits carried across the barrier into frozen frames", unwinds)
	if gcsStackCopy() && gcsLazy() && unwinds == 0 {
		t.Error("no panic or Goexit crossed the barrier with deferred calls frozen")
	}
}
