package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/scope"
)

// These tests check the benchmark helpers themselves: a benchmark that
// measured something other than what it claims would be worse than none.

// recurseFrames counts the frames of recurse on the calling goroutine.
func recurseFrames() int {
	pcs := make([]uintptr, 4096)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	n := 0
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/bench.recurse") {
			n++
		}
		if !more {
			return n
		}
	}
}

// settle waits for the number of goroutines to drop to want: a goroutine
// that has signalled it is done may still be exiting.
func settle(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left running, want %d", runtime.NumGoroutine(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkGoroutines checks the goroutines that n suspended instances of impl
// hold: one each, except weft's on the stack-copying backend, which holds
// none. At least one each, and fewer than n/2+2 without: the runtime may be
// running a cleanup on a goroutine that counts while it does.
func checkGoroutines(t *testing.T, impl string, base, n int) {
	t.Helper()
	got := runtime.NumGoroutine()
	if strings.HasPrefix(impl, "weft") && weft.ActiveBackend() == weft.StackCopying {
		if got >= base+n/2+2 {
			t.Errorf("%s: %d goroutines with %d suspended on the stack-copying backend, want about %d", impl, got, n, base)
		}
		return
	}
	if got < base+n {
		t.Errorf("%s: %d goroutines with %d suspended, want at least %d", impl, got, n, base+n)
	}
}

func TestPeers(t *testing.T) {
	for _, pr := range peers {
		for _, d := range depths {
			base := goroutines.Settled()
			got := -1
			p := pr.new(d, func() { got = recurseFrames() })
			if got != d {
				t.Errorf("%s: suspended under %d frames of recurse, want %d", pr.name, got, d)
			}
			checkGoroutines(t, pr.name, base, 1)
			const trips = 7
			p.run(trips)
			p.run(0)
			if y := p.close(); y != trips+1 {
				t.Errorf("%s at depth %d: body suspended %d times for %d round trips, want %d", pr.name, d, y, trips, trips+1)
			}
			settle(t, base)
		}
	}
}

func TestSuspenders(t *testing.T) {
	const n = 200
	for _, s := range suspenders {
		base := goroutines.Settled()
		suspend, end := s.prepare(n)
		suspend()
		checkGoroutines(t, s.name, base, n)
		end()
		settle(t, base)

		heap, stack, elapsed := measureSuspended(s, n)
		if heap+stack <= 0 || elapsed <= 0 {
			t.Errorf("%s: measured %d+%d bytes in %v for %d suspended", s.name, heap, stack, elapsed, n)
		}
		settle(t, base)
	}
}

func TestGenerators(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, g := range generators {
		for _, n := range []int{0, 1, 2, genLen} {
			if got, want := g.sum(count(n)), n*(n-1)/2; got != want {
				t.Errorf("%s: sum of count(%d) = %d, want %d", g.name, n, got, want)
			}
		}
	}
	settle(t, base)
}

func TestCoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, k := range coroutines {
		c := k.new()
		for i := range 5 {
			if got := c.resume(i * 10); got != i*10+1 {
				t.Errorf("%s: resume(%d) = %d, want %d", k.name, i*10, got, i*10+1)
			}
			if c.isDone() {
				t.Fatalf("%s: done after resume(%d)", k.name, i*10)
			}
		}
		if got := c.resume(-3); got != -3 || !c.isDone() {
			t.Errorf("%s: resume(-3) = %d, done %v; want -3, true", k.name, got, c.isDone())
		}
	}
	settle(t, base)
}

func TestShortPulls(t *testing.T) {
	base := goroutines.Settled()
	for _, p := range pulls {
		for _, c := range []struct{ n, take, want int }{{1, 1, 0}, {10, 10, 45}, {10, 3, 3}, {2, 5, 1}} {
			if got := pullTake(p.pull, c.n, c.take); got != c.want {
				t.Errorf("%s: %d of count(%d) sum to %d, want %d", p.name, c.take, c.n, got, c.want)
			}
		}
	}
	settle(t, base)
}

func TestTreeWalk(t *testing.T) {
	base := goroutines.Settled()
	const n = 1000
	tree := balanced(0, n)
	want := 0
	for v := range tree.all() {
		if v != want {
			t.Fatalf("the walk yielded %d, want %d", v, want)
		}
		want++
	}
	if want != n {
		t.Fatalf("the walk yielded %d values, want %d", want, n)
	}
	for _, p := range pulls {
		if got := sumPull(p.pull, tree.all()); got != n*(n-1)/2 {
			t.Errorf("%s: the tree sums to %d, want %d", p.name, got, n*(n-1)/2)
		}
	}
	settle(t, base)
}

func TestUnwinders(t *testing.T) {
	base := goroutines.Settled()
	for _, u := range unwinders {
		for _, d := range []int{1, 10, 50} {
			w := u.new(d)
			const trips = 7
			w.run(trips)
			if y := w.close(); y != trips+1 {
				t.Errorf("%s at depth %d: body suspended %d times for %d resumes, want %d", u.name, d, y, trips, trips+1)
			}
		}
	}
	settle(t, base)
}

func TestNewRunRun(t *testing.T) {
	s := scope.New("bench")
	ran := 0
	body := func() {
		ran++
		continuation.Yield(s)
		ran++
	}
	for range 3 {
		newRunRun(s, body)
	}
	if ran != 6 {
		t.Errorf("bodies ran %d steps, want 6", ran)
	}
}
