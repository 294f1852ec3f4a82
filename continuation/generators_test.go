package continuation_test

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// This file checks that Pull and Pull2 are drop-in replacements for
// iter.Pull and iter.Pull2: every scenario runs against the standard
// library's implementation and weft's, and the observable behaviour (the
// order of events in seq and in the caller, values, panics, Goexit) must be
// identical. It also covers Coroutine and nested generators.

// genLog records what a scenario observes, in order. It is safe for use
// from several goroutines (a scenario may run next on another goroutine).
type genLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *genLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *genLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// genCatch runs f and reports whether it panicked, and with what.
func genCatch(f func()) (val any, panicked bool) {
	panicked = true
	defer func() {
		if panicked {
			val = recover()
		}
	}()
	f()
	panicked = false
	return nil, false
}

// genPulled is a pull iterator over ints in a form shared by Pull and Pull2:
// next returns the value formatted as a string.
type genPulled struct {
	next func() (string, bool)
	stop func()
}

type genPullImpl struct {
	name string
	pull func(iter.Seq[int]) genPulled
}

func genViaPull(name string, pull func(iter.Seq[int]) (func() (int, bool), func())) genPullImpl {
	return genPullImpl{name, func(seq iter.Seq[int]) genPulled {
		next, stop := pull(seq)
		return genPulled{
			next: func() (string, bool) {
				v, ok := next()
				return strconv.Itoa(v), ok
			},
			stop: stop,
		}
	}}
}

// genViaPull2 adapts a Pull2 implementation: the Seq2 pairs each value k with
// "v"+k, and next checks the pairing (and that the pair is zero when next
// reports false) and reports a broken pair in the value it returns.
func genViaPull2(name string, pull2 func(iter.Seq2[int, string]) (func() (int, string, bool), func())) genPullImpl {
	return genPullImpl{name, func(seq iter.Seq[int]) genPulled {
		seq2 := func(yield func(int, string) bool) {
			seq(func(k int) bool { return yield(k, "v"+strconv.Itoa(k)) })
		}
		next, stop := pull2(seq2)
		return genPulled{
			next: func() (string, bool) {
				k, v, ok := next()
				s := strconv.Itoa(k)
				if (ok && v != "v"+s) || (!ok && v != "") {
					s += fmt.Sprintf("(bad pair value %q)", v)
				}
				return s, ok
			},
			stop: stop,
		}
	}}
}

// Each group lists the reference implementation first.
var genPullGroups = [][]genPullImpl{
	{genViaPull("iter.Pull", iter.Pull[int]), genViaPull("continuation.Pull", continuation.Pull[int])},
	{genViaPull2("iter.Pull2", iter.Pull2[int, string]), genViaPull2("continuation.Pull2", continuation.Pull2[int, string])},
}

// genCountTo returns a seq that logs its progress, yields 1..n and honours
// yield's false.
func genCountTo(l *genLog, n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		l.add("seq start")
		defer l.add("seq defer")
		for i := 1; i <= n; i++ {
			ok := yield(i)
			l.add("yield %d -> %v", i, ok)
			if !ok {
				return
			}
		}
		l.add("seq end")
	}
}

func genLogNext(l *genLog, p genPulled) bool {
	v, ok := p.next()
	l.add("next -> %s %v", v, ok)
	return ok
}

func genLogStop(l *genLog, p genPulled) {
	l.add("stop")
	p.stop()
	l.add("stop returned")
}

func genLogCatch(l *genLog, what string, f func()) {
	v, panicked := genCatch(f)
	if panicked {
		l.add("%s panicked: %T %v", what, v, v)
	} else {
		l.add("%s returned", what)
	}
}

// genOnGoroutine runs f on a new goroutine and waits for it to end, by
// returning or by runtime.Goexit.
func genOnGoroutine(l *genLog, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer l.add("goroutine exits")
		f()
		l.add("goroutine function returned")
	}()
	<-done
}

type genPanicToken struct{ id int }

var genPullScenarios = []struct {
	name string
	run  func(l *genLog, pull func(iter.Seq[int]) genPulled)
	want []string
}{
	{
		name: "full iteration, then next and stop after exhaustion",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(genCountTo(l, 3))
			for genLogNext(l, p) {
			}
			genLogNext(l, p)
			genLogNext(l, p)
			genLogStop(l, p)
			genLogStop(l, p)
			genLogNext(l, p)
		},
		want: []string{
			"seq start", "next -> 1 true",
			"yield 1 -> true", "next -> 2 true",
			"yield 2 -> true", "next -> 3 true",
			"yield 3 -> true", "seq end", "seq defer", "next -> 0 false",
			"next -> 0 false", "next -> 0 false",
			"stop", "stop returned", "stop", "stop returned",
			"next -> 0 false",
		},
	},
	{
		name: "early stop, stop called several times, next after stop",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(genCountTo(l, 5))
			genLogNext(l, p)
			genLogNext(l, p)
			genLogStop(l, p)
			genLogStop(l, p)
			genLogNext(l, p)
			genLogStop(l, p)
			genLogNext(l, p)
		},
		want: []string{
			"seq start", "next -> 1 true",
			"yield 1 -> true", "next -> 2 true",
			"stop", "yield 2 -> false", "seq defer", "stop returned",
			"stop", "stop returned",
			"next -> 0 false",
			"stop", "stop returned",
			"next -> 0 false",
		},
	},
	{
		name: "stop before the first next: seq never runs",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(genCountTo(l, 3))
			genLogStop(l, p)
			genLogNext(l, p)
			genLogStop(l, p)
		},
		want: []string{"stop", "stop returned", "next -> 0 false", "stop", "stop returned"},
	},
	{
		name: "empty seq",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(genCountTo(l, 0))
			genLogNext(l, p)
			genLogNext(l, p)
			genLogStop(l, p)
		},
		want: []string{"seq start", "seq end", "seq defer", "next -> 0 false", "next -> 0 false", "stop", "stop returned"},
	},
	{
		name: "seq ignores false from yield and keeps yielding",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				for i := 1; i <= 4; i++ {
					l.add("yield %d -> %v", i, yield(i))
				}
			})
			genLogNext(l, p)
			genLogNext(l, p)
			genLogStop(l, p)
			genLogNext(l, p)
		},
		want: []string{
			"next -> 1 true", "yield 1 -> true", "next -> 2 true",
			"stop", "yield 2 -> false", "yield 3 -> false", "yield 4 -> false", "seq defer", "stop returned",
			"next -> 0 false",
		},
	},
	{
		name: "panic on the first next",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				panic("boom")
			})
			genLogCatch(l, "next", func() { genLogNext(l, p) })
			genLogNext(l, p)
			genLogCatch(l, "stop", p.stop)
			genLogNext(l, p)
		},
		want: []string{
			"seq defer", "next panicked: string boom",
			"next -> 0 false", "stop returned", "next -> 0 false",
		},
	},
	{
		name: "panic on a later next",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				for i := 1; i <= 2; i++ {
					l.add("yield %d -> %v", i, yield(i))
				}
				panic(fmt.Errorf("late %d", 3))
			})
			genLogCatch(l, "next", func() { genLogNext(l, p) })
			genLogCatch(l, "next", func() { genLogNext(l, p) })
			genLogCatch(l, "next", func() { genLogNext(l, p) })
			genLogCatch(l, "next", func() { genLogNext(l, p) })
			genLogCatch(l, "stop", p.stop)
		},
		want: []string{
			"next -> 1 true", "next returned",
			"yield 1 -> true", "next -> 2 true", "next returned",
			"yield 2 -> true", "seq defer", "next panicked: *errors.errorString late 3",
			"next -> 0 false", "next returned",
			"stop returned",
		},
	},
	{
		name: "panic(nil) in seq",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				yield(1)
				panic(nil)
			})
			genLogNext(l, p)
			v, panicked := genCatch(func() { p.next() })
			_, isNil := v.(*runtime.PanicNilError)
			l.add("next panicked %v with *runtime.PanicNilError %v", panicked, isNil)
			genLogNext(l, p)
		},
		want: []string{
			"next -> 1 true",
			"next panicked true with *runtime.PanicNilError true",
			"next -> 0 false",
		},
	},
	{
		name: "panic in seq after yield returned false propagates from stop",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				for i := 1; ; i++ {
					if !yield(i) {
						panic(genPanicToken{i})
					}
				}
			})
			genLogNext(l, p)
			genLogNext(l, p)
			genLogCatch(l, "stop", p.stop)
			genLogNext(l, p)
			genLogCatch(l, "stop", p.stop)
		},
		want: []string{
			"next -> 1 true", "next -> 2 true",
			"seq defer", "stop panicked: continuation_test.genPanicToken {2}",
			"next -> 0 false", "stop returned",
		},
	},
	{
		name: "seq recovers a panic of its own and goes on",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				for i := 1; i <= 2; i++ {
					func() {
						defer func() { l.add("seq recovered %v", recover()) }()
						if !yield(i) {
							return
						}
						panic(i)
					}()
				}
			})
			for genLogNext(l, p) {
			}
		},
		want: []string{
			"next -> 1 true", "seq recovered 1", "next -> 2 true", "seq recovered 2", "next -> 0 false",
		},
	},
	{
		name: "runtime.Goexit in seq on the first next",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				runtime.Goexit()
			})
			genOnGoroutine(l, func() {
				genLogNext(l, p)
			})
			genLogNext(l, p)
			genLogStop(l, p)
		},
		want: []string{"seq defer", "goroutine exits", "next -> 0 false", "stop", "stop returned"},
	},
	{
		name: "runtime.Goexit in seq on a later next, on another goroutine",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				l.add("yield 1 -> %v", yield(1))
				runtime.Goexit()
			})
			genLogNext(l, p)
			genOnGoroutine(l, func() {
				genLogNext(l, p)
			})
			genLogNext(l, p)
			genLogStop(l, p)
		},
		want: []string{
			"next -> 1 true",
			"yield 1 -> true", "seq defer", "goroutine exits",
			"next -> 0 false", "stop", "stop returned",
		},
	},
	{
		name: "runtime.Goexit in seq during stop",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(func(yield func(int) bool) {
				defer l.add("seq defer")
				if !yield(1) {
					runtime.Goexit()
				}
			})
			genLogNext(l, p)
			genOnGoroutine(l, func() {
				genLogStop(l, p)
			})
			genLogNext(l, p)
			genLogStop(l, p)
		},
		want: []string{
			"next -> 1 true",
			"stop", "seq defer", "goroutine exits",
			"next -> 0 false", "stop", "stop returned",
		},
	},
	{
		name: "next and stop called from different goroutines in turn",
		run: func(l *genLog, pull func(iter.Seq[int]) genPulled) {
			p := pull(genCountTo(l, 5))
			for range 3 {
				genOnGoroutine(l, func() { genLogNext(l, p) })
			}
			genOnGoroutine(l, func() { genLogStop(l, p) })
			genLogNext(l, p)
		},
		want: []string{
			"seq start", "next -> 1 true", "goroutine function returned", "goroutine exits",
			"yield 1 -> true", "next -> 2 true", "goroutine function returned", "goroutine exits",
			"yield 2 -> true", "next -> 3 true", "goroutine function returned", "goroutine exits",
			"stop", "yield 3 -> false", "seq defer", "stop returned", "goroutine function returned", "goroutine exits",
			"next -> 0 false",
		},
	},
}

func TestPullMatchesIterPull(t *testing.T) {
	for _, group := range genPullGroups {
		ref := group[0]
		for _, sc := range genPullScenarios {
			t.Run(ref.name+"/"+sc.name, func(t *testing.T) {
				var refLog genLog
				sc.run(&refLog, ref.pull)
				if got := refLog.get(); !slices.Equal(got, sc.want) {
					t.Fatalf("the reference %s does not behave as this test expects (a test bug):\n got %q\nwant %q", ref.name, got, sc.want)
				}
				for _, impl := range group[1:] {
					var l genLog
					sc.run(&l, impl.pull)
					if got := l.get(); !slices.Equal(got, sc.want) {
						t.Errorf("%s differs from %s:\n got %q\nwant %q", impl.name, ref.name, got, sc.want)
					}
				}
			})
		}
	}
}

// TestPullPanicValueIdentity checks that next and stop re-panic with the
// very value seq panicked with, not a copy or a wrapper.
func TestPullPanicValueIdentity(t *testing.T) {
	impls := map[string]func(iter.Seq[*int]) (func() (*int, bool), func()){
		"iter.Pull":         iter.Pull[*int],
		"continuation.Pull": continuation.Pull[*int],
	}
	for name, pull := range impls {
		t.Run(name, func(t *testing.T) {
			errSentinel := errors.New("sentinel")
			wrapped := fmt.Errorf("wrapped: %w", errSentinel)
			x := new(int)
			next, stop := pull(func(yield func(*int) bool) {
				if !yield(x) {
					panic(wrapped)
				}
				panic(x)
			})
			v, ok := next()
			if !ok || v != x {
				t.Fatalf("next = %p, %v; want %p, true", v, ok, x)
			}
			got, panicked := genCatch(func() { next() })
			if !panicked || got != any(x) {
				t.Fatalf("next panicked=%v with %v; want the pointer %p", panicked, got, x)
			}
			stop() // the sequence is over: no panic

			next, stop = pull(func(yield func(*int) bool) {
				if !yield(x) {
					panic(wrapped)
				}
			})
			next()
			got, panicked = genCatch(stop)
			err, _ := got.(error)
			if !panicked || err != wrapped || !errors.Is(err, errSentinel) {
				t.Fatalf("stop panicked=%v with %v; want %v", panicked, got, wrapped)
			}
		})
	}
}

func TestPull2Maps(t *testing.T) {
	m := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
	impls := []struct {
		name string
		pull func(iter.Seq2[string, int]) (func() (string, int, bool), func())
	}{
		{"iter.Pull2", iter.Pull2[string, int]},
		{"continuation.Pull2", continuation.Pull2[string, int]},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			next, stop := impl.pull(maps.All(m))
			defer stop()
			got := map[string]int{}
			for {
				k, v, ok := next()
				if !ok {
					if k != "" || v != 0 {
						t.Fatalf("next at the end = %q, %d; want zero values", k, v)
					}
					break
				}
				if _, dup := got[k]; dup {
					t.Fatalf("key %q twice", k)
				}
				got[k] = v
			}
			if !maps.Equal(got, m) {
				t.Fatalf("pulled %v, want %v", got, m)
			}

			// Early stop after two pairs: the map's iterator sees false.
			next, stop = impl.pull(maps.All(m))
			for range 2 {
				if _, _, ok := next(); !ok {
					t.Fatal("next = false before the end")
				}
			}
			stop()
			if k, v, ok := next(); ok || k != "" || v != 0 {
				t.Fatalf("next after stop = %q, %d, %v", k, v, ok)
			}
		})
	}
}

// TestPullLongSequence pulls many values, from nested loops in seq, and
// compares with a plain range loop.
func TestPullLongSequence(t *testing.T) {
	seq := func(yield func(int) bool) {
		for i := range 100 {
			for j := range 50 {
				if !yield(i*1000 + j) {
					return
				}
			}
		}
	}
	var want []int
	for v := range seq {
		want = append(want, v)
	}
	next, stop := continuation.Pull(iter.Seq[int](seq))
	defer stop()
	var got []int
	for {
		v, ok := next()
		if !ok {
			break
		}
		got = append(got, v)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pulled %d values, want %d (first difference at %d)", len(got), len(want), genFirstDiff(got, want))
	}
}

func genFirstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPullDoesNotRetainValues checks that a suspended Pull does not keep
// alive a value that next has returned and that seq itself no longer uses.
// (iter.Pull keeps the last value until the next call; weft's Pull clears
// it, which this test holds it to.)
func TestPullDoesNotRetainValues(t *testing.T) {
	type big struct {
		buf [256]byte
		p   *int
	}
	var collected atomic.Int32
	next, stop := continuation.Pull(func(yield func(*big) bool) {
		for i := range 3 {
			b := &big{p: new(int)}
			b.buf[0] = byte(i)
			runtime.AddCleanup(b, func(c *atomic.Int32) { c.Add(1) }, &collected)
			if !yield(b) {
				return
			}
		}
	})
	defer stop()
	b, ok := next()
	if !ok || b.buf[0] != 0 {
		t.Fatalf("next = %v, %v", b, ok)
	}
	b = nil
	_ = b
	// seq is now suspended inside yield: the first value must be collectable.
	if !gcPollUntil(10*time.Second, func() bool { return collected.Load() >= 1 }) {
		t.Fatal("the value returned by next is still reachable while seq is suspended: the Pull retains it")
	}
}

// gcPollUntil runs the garbage collector and waits until cond is true or the
// time is up, and reports whether cond became true.
func gcPollUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for sleep := time.Millisecond; ; sleep = min(2*sleep, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return cond()
		}
		runtime.GC()
		time.Sleep(sleep)
	}
}

// TestPullMisuse: weft's Pull reports a re-entrant or concurrent next
// with ErrMounted, and a yield from another goroutine with ErrNotInScope,
// and goes on working afterwards. (iter.Pull panics differently.)
func TestPullMisuse(t *testing.T) {
	var next func() (int, bool)
	entered, release := make(chan struct{}), make(chan struct{})
	var reentrant, foreign any
	next, stop := continuation.Pull(func(yield func(int) bool) {
		reentrant, _ = genCatch(func() { next() })
		if !yield(1) {
			return
		}
		entered <- struct{}{}
		<-release
		ch := make(chan any)
		go func() {
			v, _ := genCatch(func() { yield(99) })
			ch <- v
		}()
		foreign = <-ch
		yield(2)
	})
	defer stop()
	if v, ok := next(); v != 1 || !ok {
		t.Fatalf("next = %d, %v; want 1, true", v, ok)
	}
	if err, _ := reentrant.(error); !errors.Is(err, continuation.ErrMounted) {
		t.Fatalf("next from inside seq panicked with %v, want an error wrapping ErrMounted", reentrant)
	}
	done := make(chan struct{})
	var v int
	var ok bool
	go func() {
		defer close(done)
		v, ok = next()
	}()
	<-entered // seq is running, on behalf of the other goroutine
	concurrent, _ := genCatch(func() { next() })
	close(release)
	<-done
	if err, _ := concurrent.(error); !errors.Is(err, continuation.ErrMounted) {
		t.Fatalf("next while another next runs seq panicked with %v, want an error wrapping ErrMounted", concurrent)
	}
	if err, _ := foreign.(error); !errors.Is(err, continuation.ErrNotInScope) {
		t.Fatalf("yield from another goroutine panicked with %v, want an error wrapping ErrNotInScope", foreign)
	}
	if v != 2 || !ok {
		t.Fatalf("next = %d, %v; want 2, true", v, ok)
	}
	if v, ok := next(); v != 0 || ok {
		t.Fatalf("next at the end = %d, %v; want 0, false", v, ok)
	}
}

// TestPullNested runs Pulls inside the seq of another Pull, a few levels
// deep, against iter.Pull: full iteration, then an early stop that must
// unwind every level in order.
func TestPullNested(t *testing.T) {
	type pullFn = func(iter.Seq[int]) (func() (int, bool), func())
	// level returns a seq that pulls from the level below (or counts, at
	// the bottom) and yields 10*v+depth.
	var level func(l *genLog, pull pullFn, depth int) iter.Seq[int]
	level = func(l *genLog, pull pullFn, depth int) iter.Seq[int] {
		return func(yield func(int) bool) {
			defer l.add("level %d defer", depth)
			if depth == 0 {
				for i := 1; i <= 4; i++ {
					if !yield(i) {
						l.add("level 0 told to stop at %d", i)
						return
					}
				}
				return
			}
			next, stop := pull(level(l, pull, depth-1))
			defer stop()
			for {
				v, ok := next()
				if !ok {
					l.add("level %d: below is exhausted", depth)
					return
				}
				if !yield(10*v + depth) {
					l.add("level %d told to stop", depth)
					return
				}
			}
		}
	}
	run := func(pull pullFn) []string {
		var l genLog
		next, stop := pull(level(&l, pull, 4))
		for {
			v, ok := next()
			l.add("got %d %v", v, ok)
			if !ok {
				break
			}
		}
		stop()
		next, stop = pull(level(&l, pull, 4))
		for range 2 {
			v, ok := next()
			l.add("got %d %v", v, ok)
		}
		stop()
		l.add("stopped")
		return l.get()
	}
	want := run(iter.Pull[int])
	if !slices.Contains(want, "got 11234 true") || !slices.Contains(want, "level 0 told to stop at 2") {
		t.Fatalf("the reference run is not what this test expects: %q", want)
	}
	if got := run(continuation.Pull[int]); !slices.Equal(got, want) {
		t.Fatalf("nested continuation.Pull differs from iter.Pull:\n got %q\nwant %q", got, want)
	}
}

// TestPullYieldsToEnclosingScope: seq, running in a Pull nested inside a
// continuation, yields to the continuation's scope; the whole nest is
// suspended and resumed. iter.Pull cannot do this.
func TestPullYieldsToEnclosingScope(t *testing.T) {
	s := scope.New("outer")
	var l genLog
	var cur *continuation.Continuation
	c := continuation.New(s, func() {
		next, stop := continuation.Pull(func(yield func(int) bool) {
			for i := range 3 {
				cur = continuation.Current(s)
				continuation.Yield(s)
				l.add("seq yields %d", i)
				if !yield(i) {
					return
				}
			}
		})
		defer stop()
		for {
			v, ok := next()
			if !ok {
				break
			}
			l.add("got %d", v)
		}
	})
	for !c.IsDone() {
		c.Run()
		if !c.IsDone() {
			if cur != c {
				t.Errorf("Current(outer) inside seq = %v, want the outer continuation", cur)
			}
			l.add("outer suspended")
		}
	}
	want := []string{
		"outer suspended", "seq yields 0", "got 0",
		"outer suspended", "seq yields 1", "got 1",
		"outer suspended", "seq yields 2", "got 2",
	}
	if got := l.get(); !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if st := c.Stats(); st.Yields != 3 {
		t.Errorf("outer Stats().Yields = %d, want 3", st.Yields)
	}
}

func TestCoroutineExchange(t *testing.T) {
	var l genLog
	co := continuation.NewCoroutine(func(in int, yield func(string) int) string {
		l.add("body starts with %d", in)
		sum := in
		for i := range 3 {
			got := yield("sum=" + strconv.Itoa(sum))
			l.add("yield %d returned %d", i, got)
			sum += got
		}
		return "final=" + strconv.Itoa(sum)
	})
	if co.IsDone() {
		t.Fatal("IsDone before the first Resume")
	}
	for _, in := range []int{1, 10, 100, 1000} {
		out := co.Resume(in)
		l.add("Resume(%d) = %s, done %v", in, out, co.IsDone())
	}
	want := []string{
		"body starts with 1", "Resume(1) = sum=1, done false",
		"yield 0 returned 10", "Resume(10) = sum=11, done false",
		"yield 1 returned 100", "Resume(100) = sum=111, done false",
		"yield 2 returned 1000", "Resume(1000) = final=1111, done true",
	}
	if got := l.get(); !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	v, panicked := genCatch(func() { co.Resume(5) })
	if err, _ := v.(error); !panicked || !errors.Is(err, continuation.ErrDone) {
		t.Fatalf("Resume after done: panicked=%v with %v; want an error wrapping ErrDone", panicked, v)
	}
	if st := co.Continuation().Stats(); st.Runs != 4 || st.Yields != 3 {
		t.Errorf("Stats = %+v, want 4 runs and 3 yields", st)
	}
}

func TestCoroutineReturnsAtOnce(t *testing.T) {
	co := continuation.NewCoroutine(func(in []int, yield func(int) []int) int {
		return len(in)
	})
	if got := co.Resume([]int{1, 2, 3}); got != 3 || !co.IsDone() {
		t.Fatalf("Resume = %d, IsDone %v; want 3, true", got, co.IsDone())
	}
}

// TestCoroutinePointerValues checks that values passed through Resume and
// yield are the very values (pointers compare equal) in both directions.
func TestCoroutinePointerValues(t *testing.T) {
	a, b, c := new(int), new(int), new(int)
	co := continuation.NewCoroutine(func(in *int, yield func(*int) *int) *int {
		if in != a {
			panic("first in is not a")
		}
		if yield(b) != c {
			panic("yield did not return c")
		}
		return a
	})
	if got := co.Resume(a); got != b {
		t.Fatalf("first Resume = %p, want %p", got, b)
	}
	if got := co.Resume(c); got != a || !co.IsDone() {
		t.Fatalf("second Resume = %p (done %v), want %p", got, co.IsDone(), a)
	}
}

func TestCoroutineYieldFromAnotherGoroutine(t *testing.T) {
	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		ch := make(chan any)
		go func() {
			v, _ := genCatch(func() { yield(in) })
			ch <- v
		}()
		v := <-ch
		if err, _ := v.(error); !errors.Is(err, continuation.ErrNotInScope) {
			panic(fmt.Sprintf("yield on another goroutine panicked with %v; want an error wrapping ErrNotInScope", v))
		}
		// yield still works on the body's own goroutine.
		return yield(in+1) + 1
	})
	if got := co.Resume(1); got != 2 || co.IsDone() {
		t.Fatalf("Resume(1) = %d (done %v), want 2, not done", got, co.IsDone())
	}
	if got := co.Resume(7); got != 8 || !co.IsDone() {
		t.Fatalf("Resume(7) = %d (done %v), want 8, done", got, co.IsDone())
	}
}

func TestCoroutinePanic(t *testing.T) {
	type myPanic struct{ at int }
	deferred := 0
	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		defer func() { deferred++ }()
		for {
			in = yield(in * 2)
			if in < 0 {
				panic(myPanic{in})
			}
		}
	})
	if got := co.Resume(2); got != 4 {
		t.Fatalf("Resume(2) = %d, want 4", got)
	}
	v, panicked := genCatch(func() { co.Resume(-3) })
	if !panicked || v != any(myPanic{-3}) {
		t.Fatalf("Resume(-3) panicked=%v with %v; want myPanic{-3}", panicked, v)
	}
	if !co.IsDone() || deferred != 1 {
		t.Fatalf("after the panic: IsDone %v, deferred calls run %d; want true, 1", co.IsDone(), deferred)
	}
	v, panicked = genCatch(func() { co.Resume(1) })
	if err, _ := v.(error); !panicked || !errors.Is(err, continuation.ErrDone) {
		t.Fatalf("Resume after a panic: panicked=%v with %v; want ErrDone", panicked, v)
	}
}

func TestCoroutineGoexit(t *testing.T) {
	var l genLog
	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		defer l.add("body defer")
		yield(in)
		runtime.Goexit()
		return 0
	})
	if got := co.Resume(5); got != 5 {
		t.Fatalf("Resume(5) = %d", got)
	}
	genOnGoroutine(&l, func() { co.Resume(6) })
	want := []string{"body defer", "goroutine exits"}
	if got := l.get(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !co.IsDone() {
		t.Fatal("IsDone = false after the body called runtime.Goexit")
	}
}

// TestCoroutineStackTrace checks the frames of a suspended coroutine: from
// the function that called yield down to the body.
func TestCoroutineStackTrace(t *testing.T) {
	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		return genCoroutineHelper(in, yield)
	})
	if st := co.Continuation().StackTrace(); st != nil {
		t.Fatalf("StackTrace before the first Resume = %v, want nil", st)
	}
	co.Resume(3)
	frames := co.Continuation().StackTrace()
	var names []string
	for _, f := range frames {
		names = append(names, f.Function)
	}
	i := slices.IndexFunc(names, func(s string) bool { return strings.HasSuffix(s, ".genCoroutineHelper") })
	if i < 0 {
		t.Fatalf("StackTrace of a suspended coroutine %q lacks genCoroutineHelper", names)
	}
	if n := strings.Count(strings.Join(names, " "), ".genCoroutineHelper"); n != 4 {
		t.Fatalf("StackTrace %q has %d genCoroutineHelper frames, want 4", names, n)
	}
	if got := co.Resume(0); got != 3 || !co.IsDone() {
		t.Fatalf("final Resume = %d, done %v", got, co.IsDone())
	}
	if st := co.Continuation().StackTrace(); st != nil {
		t.Fatalf("StackTrace when done = %v, want nil", st)
	}
}

//go:noinline
func genCoroutineHelper(n int, yield func(int) int) int {
	if n == 0 {
		return yield(-1)
	}
	return genCoroutineHelper(n-1, yield) + 1
}

// genSaxEvent is what the XML coroutine reports: "need" asks for more input,
// the others describe the document.
type genSaxEvent struct {
	kind string
	text string
}

// genChunkReader reads from chunks obtained from more; more returning nil
// means end of input.
type genChunkReader struct {
	buf  []byte
	more func() []byte
}

func (r *genChunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		r.buf = r.more()
		if r.buf == nil {
			return 0, io.EOF
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// genSaxWalk decodes the document from r and reports events to emit.
func genSaxWalk(r io.Reader, emit func(genSaxEvent)) genSaxEvent {
	dec := xml.NewDecoder(r)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return genSaxEvent{kind: "eof"}
		}
		if err != nil {
			return genSaxEvent{kind: "error", text: err.Error()}
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			var attrs []string
			for _, a := range tok.Attr {
				attrs = append(attrs, a.Name.Local+"="+a.Value)
			}
			emit(genSaxEvent{kind: "start", text: tok.Name.Local + fmt.Sprint(attrs)})
		case xml.EndElement:
			emit(genSaxEvent{kind: "end", text: tok.Name.Local})
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				emit(genSaxEvent{kind: "text", text: s})
			}
		}
	}
}

// TestCoroutineXMLInversion inverts encoding/xml: the decoder runs inside a
// coroutine, which yields every element to the caller, and asks the caller
// for input by yielding from the Read method the decoder calls. Both kinds
// of yield happen below stdlib frames.
func TestCoroutineXMLInversion(t *testing.T) {
	var doc strings.Builder
	doc.WriteString(`<?xml version="1.0"?><library name="weft">`)
	for i := range 40 {
		fmt.Fprintf(&doc, "\n  <book id=\"%d\"><title>Title %d</title><tags><tag>t%d</tag><tag>x</tag></tags></book>", i, i, i%7)
	}
	doc.WriteString("\n</library>\n")
	input := []byte(doc.String())

	var want []genSaxEvent
	end := genSaxWalk(strings.NewReader(doc.String()), func(e genSaxEvent) { want = append(want, e) })
	want = append(want, end)

	co := continuation.NewCoroutine(func(first []byte, yield func(genSaxEvent) []byte) genSaxEvent {
		r := &genChunkReader{buf: first, more: func() []byte {
			return yield(genSaxEvent{kind: "need"})
		}}
		return genSaxWalk(r, func(e genSaxEvent) {
			if in := yield(e); in != nil {
				panic("input offered after an element event")
			}
		})
	})

	const chunk = 13
	rest := input
	take := func() []byte {
		if len(rest) == 0 {
			return nil
		}
		n := min(chunk, len(rest))
		c := rest[:n:n]
		rest = rest[n:]
		return c
	}
	var got []genSaxEvent
	needs := 0
	sawStdlibFrames := false
	ev := co.Resume(take())
	for {
		if ev.kind == "need" {
			needs++
			if !sawStdlibFrames {
				sawStdlibFrames = genHasFrames(co.Continuation().StackTrace(), "encoding/xml.", "bufio.", ".(*genChunkReader).Read")
			}
			ev = co.Resume(take())
			continue
		}
		got = append(got, ev)
		if co.IsDone() {
			break
		}
		ev = co.Resume(nil)
	}
	if !slices.Equal(got, want) {
		i := genFirstDiff(got, want)
		t.Fatalf("events differ at %d of %d/%d: got %v, want %v", i, len(got), len(want), got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
	}
	if end.kind != "eof" || len(want) < 200 {
		t.Fatalf("the plain walk ended with %v after %d events", end, len(want))
	}
	if minNeeds := len(input) / chunk; needs < minNeeds {
		t.Fatalf("the coroutine asked for input %d times, want at least %d", needs, minNeeds)
	}
	if !sawStdlibFrames {
		t.Fatal("the StackTrace of a coroutine suspended in Read lacks the encoding/xml, bufio or Read frames")
	}
}

// genHasFrames reports whether frames holds, for each pattern, a function
// whose name contains it.
func genHasFrames(frames []runtime.Frame, patterns ...string) bool {
	for _, p := range patterns {
		if !slices.ContainsFunc(frames, func(f runtime.Frame) bool { return strings.Contains(f.Function, p) }) {
			return false
		}
	}
	return true
}

// TestGeneratorsMixed nests the three generators in one another: a Pull
// whose seq is driven by a Coroutine, consumed inside another Coroutine,
// with a Pull2 inside that.
func TestGeneratorsMixed(t *testing.T) {
	// fib is a coroutine: Resume(n) yields the next n Fibonacci numbers'
	// sum; a Pull turns it into a sequence.
	seq := func(yield func(int) bool) {
		fib := continuation.NewCoroutine(func(n int, y func(int) int) int {
			a, b := 0, 1
			for {
				sum := 0
				for range n {
					sum += a
					a, b = b, a+b
				}
				n = y(sum)
			}
		})
		for n := 1; n <= 6; n++ {
			if !yield(fib.Resume(n)) {
				return
			}
		}
	}
	outer := continuation.NewCoroutine(func(prefix string, yield func(string) string) string {
		next, stop := continuation.Pull(iter.Seq[int](seq))
		defer stop()
		next2, stop2 := continuation.Pull2(maps.All(map[int]string{1: "one"}))
		defer stop2()
		k, v, _ := next2()
		for {
			x, ok := next()
			if !ok {
				return prefix + "end"
			}
			prefix = yield(prefix + strconv.Itoa(x) + "/" + strconv.Itoa(k) + v)
		}
	})
	var got []string
	in := ""
	for !outer.IsDone() {
		out := outer.Resume(in)
		got = append(got, out)
		in = strconv.Itoa(len(got)) + ":"
	}
	// Sums of consecutive runs of 1, 2, ..., 6 Fibonacci numbers, starting
	// from F(0): {0}, {1,1}, {2,3,5}, {8,13,21,34}, ...
	want := []string{"0/1one", "1:2/1one", "2:10/1one", "3:76/1one", "4:898/1one", "5:16724/1one", "6:end"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A yield called from a goroutine other than the one running seq panics
// with ErrNotInScope before it hands its value over, so that neither next
// nor a Coroutine's Resume returns a value seq never yielded.
func TestForeignYieldHandsNothingOver(t *testing.T) {
	const n = 20000
	var foreignPanics atomic.Int64
	spoil := func(yield func()) (stop func()) {
		quit := make(chan struct{})
		first := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 1 {
					close(first)
				}
				select {
				case <-quit:
					return
				default:
				}
				if v, _ := genCatch(yield); v != nil {
					if err, _ := v.(error); !errors.Is(err, continuation.ErrNotInScope) {
						t.Errorf("a foreign yield panicked with %v, want ErrNotInScope", v)
						return
					}
					foreignPanics.Add(1)
				}
				runtime.Gosched() // js/wasm does not preempt a loop
			}
		}()
		// One foreign yield at least, where goroutines do not run in
		// parallel (js/wasm) and this one would otherwise wait for seq.
		<-first
		return func() { close(quit); wg.Wait() }
	}

	var stopSpoiler func()
	next, stop := continuation.Pull(func(yield func(int) bool) {
		stopSpoiler = spoil(func() { yield(-1) })
		for i := range n {
			if !yield(i) {
				return
			}
		}
	})
	bad := 0
	for i := range n {
		if v, ok := next(); v != i || !ok {
			bad++
		}
	}
	stop()
	stopSpoiler()
	if bad > 0 {
		t.Errorf("Pull: %d of %d values were not the ones seq yielded", bad, n)
	}

	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		stopSpoiler = spoil(func() { yield(-1) })
		for {
			in = yield(in * 2)
			if in < 0 {
				return 0
			}
		}
	})
	bad = 0
	for i := range n {
		if out := co.Resume(i); out != 2*i {
			bad++
		}
	}
	co.Resume(-1)
	stopSpoiler()
	if bad > 0 {
		t.Errorf("Coroutine: %d of %d results were not the body's", bad, n)
	}
	if foreignPanics.Load() == 0 {
		t.Fatal("no foreign yield ran: the test tests nothing")
	}
}

// next and Resume called from two goroutines at once (misuse) panic with
// ErrMounted in the one that finds the other running, and the running one
// is unharmed: every value comes out once, in order, with ok. They used to
// exchange values with each other (a next could return the zero value with
// ok, and a value be lost; a Resume's input reach the other's body).
func TestConcurrentNextAndResumeDoNotMix(t *testing.T) {
	const n = 20000
	next, stop := continuation.Pull(func(yield func(int) bool) {
		for i := 1; ; i++ {
			if !yield(i) {
				return
			}
		}
	})
	var mu sync.Mutex
	var got []int
	mounted := atomic.Int64{}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				var v int
				var ok bool
				if p, _ := genCatch(func() { v, ok = next() }); p != nil {
					if err, _ := p.(error); !errors.Is(err, continuation.ErrMounted) {
						t.Errorf("concurrent next panicked with %v, want ErrMounted", p)
						return
					}
					mounted.Add(1)
					continue
				}
				if !ok || v == 0 {
					t.Errorf("next = %d, %v", v, ok)
					return
				}
				mu.Lock()
				got = append(got, v)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop()
	slices.Sort(got)
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("values from concurrent next: the %dth is %d: lost or repeated", i+1, v)
		}
	}

	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		for {
			in = yield(in + 1000000)
		}
	})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				var out int
				if p, _ := genCatch(func() { out = co.Resume(i) }); p != nil {
					if err, _ := p.(error); !errors.Is(err, continuation.ErrMounted) {
						t.Errorf("concurrent Resume panicked with %v, want ErrMounted", p)
						return
					}
					mounted.Add(1)
					continue
				}
				if out != i+1000000 {
					t.Errorf("Resume(%d) = %d, want %d: another Resume's input", i, out, i+1000000)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls found another running", mounted.Load())
}
