package continuation_test

// Panics raised during runtime.Goexit, and Goexits during panics, that
// cross the return barrier with frozen frames' deferred calls pending, in
// every arrangement of the two: each compared with the same code run
// plainly (its log, the panic that escaped, and
// whether the goroutine ended by Goexit), with stack growth and garbage
// collection in the deferred calls.

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// gxEnv runs a body plainly or in a continuation resumed on fresh
// goroutines, and reports its log, the panic that escaped, and whether the
// goroutine ended by Goexit.
type gxEnv struct {
	s      *scope.Scope
	inCont bool
	log    []string
	bottom func()
}

func (e *gxEnv) yield() {
	if e.inCont {
		continuation.Yield(e.s)
	}
}

func (e *gxEnv) logf(f string, a ...any) { e.log = append(e.log, fmt.Sprintf(f, a...)) }

var gxLast *continuation.Continuation

func gxRun(inCont bool, body func(e *gxEnv)) (log []string, panicked any, goexited bool) {
	e := &gxEnv{s: scope.New("goexit-panic"), inCont: inCont}
	gxLast = nil
	done := make(chan struct{})
	go func() {
		defer close(done)
		goexited = true
		defer func() {
			if goexited {
				panicked = recover()
				if panicked != nil {
					goexited = false
				}
			}
		}()
		if !inCont {
			body(e)
			goexited = false
			return
		}
		c := continuation.New(e.s, func() { body(e) })
		gxLast = c
		for !c.IsDone() {
			runtime.GC()
			diffRunElsewhere(c)
		}
		goexited = false
	}()
	<-done
	return e.log, panicked, goexited
}

func gxCompare(t *testing.T, body func(e *gxEnv)) {
	t.Helper()
	wl, wp, wg := gxRun(false, body)
	gl, gp, gg := gxRun(true, body)
	if !slices.Equal(wl, gl) || fmt.Sprint(wp) != fmt.Sprint(gp) || wg != gg {
		t.Errorf("continuation (%s):\n  %s\n  panicked=%v goexit=%v\nplain:\n  %s\n  panicked=%v goexit=%v",
			continuation.Backend(), strings.Join(gl, "\n  "), gp, gg, strings.Join(wl, "\n  "), wp, wg)
	}
}

// gxDeep recurses d levels with a big frame so that the outer levels stay
// frozen under lazy thaw, then calls bottom after some yields.
//
//go:noinline
func gxDeep(e *gxEnv, d int) {
	var pad [64]uintptr
	pad[d%64] = uintptr(d)
	if d == 0 {
		for range 3 {
			e.yield()
		}
		e.bottom()
		return
	}
	gxDeep(e, d-1)
	e.logf("return %d %d", d, pad[d%64])
}

// The Goexit began in the outer continuation's thawed frames; its deferred
// call resumes an inner continuation (which has a host frame of its own,
// running the same code as the outer one's) whose body panics. At the outer
// barrier, the walk for a Goexit must go past the inner host frame: a first
// version stopped at the first frame running the host's code, missed the
// Goexit, and lost the panic with the outer frozen frames' deferred calls.
func TestBarrierGoexitPanicThroughInnerHost(t *testing.T) {
	gxCompare(t, func(e *gxEnv) {
		sb := scope.New("inner")
		b := continuation.New(sb, func() {
			continuation.Yield(sb)
			panic("from inner")
		})
		b.Run() // b yields once: its next Run thaws through a host frame
		defer func() { e.logf("outer recovered %v", recover()) }()
		e.bottom = func() {
			defer func() { b.Run() }()
			runtime.Goexit()
		}
		gxDeep(e, 30)
		e.logf("outer returned")
	})
}

// gxFrozen is a frame that stays frozen under lazy thaw (gxDeep above it)
// with a deferred call that logs, recovers if rec, and panics with again if
// not nil.
//
//go:noinline
func gxFrozen(e *gxEnv, name string, rec bool, again any, inner func()) {
	keep := &[4]string{name, name + "1", name + "2", name + "3"}
	defer func() {
		gxGrow(200)
		runtime.GC()
		if keep[0] != name || keep[3] != name+"3" {
			e.logf("%s: kept value changed", name)
		}
		if rec {
			e.logf("%s recovered %v", name, recover())
		} else {
			e.logf("%s deferred", name)
		}
		if again != nil {
			panic(again)
		}
	}()
	inner()
	e.logf("%s returned", name)
}

func gxCase(t *testing.T, name string, body func(e *gxEnv)) {
	t.Run(name, func(t *testing.T) {
		gxCompare(t, body)
		if gxLast != nil {
			t.Logf("done=%v stats=%+v", gxLast.IsDone(), gxLast.Stats())
			if !gxLast.IsDone() {
				t.Errorf("continuation not done")
			}
		}
	})
}

func TestBarrierGoexitPanicCases(t *testing.T) {
	deep := func(e *gxEnv, bottom func()) { e.bottom = bottom; gxDeep(e, 30) }
	gxCase(t, "goexit-repanic-recovered-frozen", func(e *gxEnv) {
		gxFrozen(e, "f0", true, nil, func() {
			deep(e, func() {
				defer func() { panic("p1") }()
				runtime.Goexit()
			})
		})
	})
	gxCase(t, "goexit-panicnil", func(e *gxEnv) {
		gxFrozen(e, "f0", true, nil, func() {
			deep(e, func() {
				defer func() { panic(nil) }()
				runtime.Goexit()
			})
		})
	})
	gxCase(t, "goexit-repanic-replaced", func(e *gxEnv) {
		gxFrozen(e, "f0", true, nil, func() {
			gxFrozen(e, "f1", false, "p2", func() {
				deep(e, func() {
					defer func() { panic("p1") }()
					runtime.Goexit()
				})
			})
		})
	})
	gxCase(t, "goexit-repanic-twice", func(e *gxEnv) {
		gxFrozen(e, "f0", true, nil, func() {
			gxFrozen(e, "f1", false, "p2", func() {
				gxFrozen(e, "f2", true, nil, func() {
					deep(e, func() {
						defer func() { panic("p1") }()
						runtime.Goexit()
					})
				})
			})
		})
	})
	gxCase(t, "panic-then-goexit-in-defer", func(e *gxEnv) {
		gxFrozen(e, "f0", true, nil, func() {
			deep(e, func() {
				defer runtime.Goexit()
				panic("p1")
			})
		})
	})
	gxCase(t, "goexit-repanic-no-frozen-defers", func(e *gxEnv) {
		deep(e, func() {
			defer func() { panic("p1") }()
			runtime.Goexit()
		})
	})
	gxCase(t, "goexit-repanic-uncaught-in-cont", func(e *gxEnv) {
		defer func() { e.logf("body deferred") }()
		gxFrozen(e, "f0", false, nil, func() {
			deep(e, func() {
				defer func() { panic("p1") }()
				runtime.Goexit()
			})
		})
	})
	gxCase(t, "nested-inner-ended-by-goexit-panic", func(e *gxEnv) {
		defer func() { e.logf("outer recovered %v", recover()) }()
		si := scope.New("inner")
		ie := &gxEnv{s: si, inCont: e.inCont}
		inner := continuation.New(si, func() {
			gxFrozen(ie, "i0", false, nil, func() {
				ie.bottom = func() {
					defer func() { panic("inner p") }()
					runtime.Goexit()
				}
				gxDeep(ie, 20)
			})
		})
		deep(e, func() {
			for !inner.IsDone() {
				inner.Run()
				e.yield()
			}
		})
		e.log = append(e.log, ie.log...)
	})
}

//go:noinline
func gxGrow(n int) int {
	var pad [32]uintptr
	pad[n%32] = uintptr(n)
	if n == 0 {
		return 0
	}
	return gxGrow(n-1) + int(pad[n%32])
}

// The Goexit began in an inner continuation whose frozen frames have no
// deferred calls: the panic leaves it untouched and crosses the outer
// barrier, where the inner Goexit (above the inner host) is found first.
func TestBarrierInnerGoexitPanicNoInnerDefers(t *testing.T) {
	gxCompare(t, func(e *gxEnv) {
		defer func() { e.logf("outer recovered %v", recover()) }()
		si := scope.New("inner")
		ie := &gxEnv{s: si, inCont: e.inCont}
		inner := continuation.New(si, func() {
			ie.bottom = func() {
				defer func() { panic("inner p") }()
				runtime.Goexit()
			}
			gxDeep(ie, 20)
		})
		e.bottom = func() {
			for !inner.IsDone() {
				inner.Run()
				e.yield()
			}
		}
		gxDeep(e, 30)
	})
}

// A panic raised during a Goexit in a body leaves the body while the Goexit
// is pending: in Run's caller, a recover stops the panic, and the caller
// goes on exiting, as in plain Go. The portable backend's iter.Pull carries
// only the panic to Run's caller, so the backend raises it again there
// during a Goexit of the caller's own. Both with and without a yield
// before the Goexit (the resume then runs on another goroutine, with the
// recover in that goroutine's frames).
func TestGoexitPanicLeavesBody(t *testing.T) {
	for _, yields := range []int{0, 1, 3} {
		run := func(inCont bool) (log []string, exited bool) {
			s := scope.New("leaves")
			body := func() {
				defer func() { panic("p") }()
				for range yields {
					if inCont {
						continuation.Yield(s)
					}
				}
				runtime.Goexit()
			}
			var c *continuation.Continuation
			if inCont {
				c = continuation.New(s, body)
			}
			// Each Run on a goroutine of its own; the last one's log is
			// compared (the others return from a yield).
			for first := true; first || (c != nil && !c.IsDone()); first = false {
				done := make(chan struct{})
				log, exited = nil, true
				go func() {
					defer close(done)
					func() {
						defer func() { log = append(log, fmt.Sprint("recovered ", recover())) }()
						if inCont {
							c.Run()
						} else {
							body()
						}
					}()
					log = append(log, "Run's caller returned")
					exited = false
				}()
				<-done
			}
			return log, exited
		}
		wantLog, wantExit := run(false)
		gotLog, gotExit := run(true)
		if !slices.Equal(gotLog, wantLog) || gotExit != wantExit {
			t.Errorf("yields=%d on %s: %q, ended by Goexit %v; plain Go: %q, %v", yields, continuation.Backend(), gotLog, gotExit, wantLog, wantExit)
		}
	}
}
