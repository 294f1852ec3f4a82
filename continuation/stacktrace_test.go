package continuation_test

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

type traceWorker struct{ s *scope.Scope }

//go:noinline
func (w *traceWorker) Work() { continuation.Yield(w.s) }

//go:noinline
func (w *traceWorker) Body() {
	f := w.Work // a method value: called through a compiler-generated wrapper
	f()
}

// StackTrace leaves out compiler-generated wrappers, as runtime.Callers
// does, on either backend: the body is a method value calling another.
func TestStackTraceOmitsWrappers(t *testing.T) {
	w := &traceWorker{s: scope.New("trace")}
	c := continuation.New(w.s, w.Body)
	c.Run()
	var names []string
	for _, f := range c.StackTrace() {
		names = append(names, f.Function[strings.LastIndex(f.Function, ".")+1:])
	}
	want := []string{"Work", "Body"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("StackTrace functions %q, want %q", names, want)
	}
	c.Run()
	if !c.IsDone() {
		t.Fatal("not done")
	}
}

// deadAfterYield holds a big object live across the first yield only, in
// an outer frame, under frames that hold more pointers: the chunk's
// pointer array is longer at that yield than at the next.
//
//go:noinline
func deadAfterYield(s *scope.Scope, collected *atomic.Bool) {
	big := new([1 << 17]uintptr)
	runtime.AddCleanup(big, func(b *atomic.Bool) { b.Store(true) }, collected)
	manyPointers(s, 3)
	big[1] = 1
	runtime.KeepAlive(big)
}

// manyPointersSink makes manyPointers' objects escape to the heap, so that
// its frames hold heap pointers.
var manyPointersSink []*int

//go:noinline
func manyPointers(s *scope.Scope, depth int) {
	a, b, c, d := new(int), new(int), new(int), new(int)
	manyPointersSink = []*int{a, b, c, d}
	if depth == 0 {
		continuation.Yield(s)
	} else {
		manyPointers(s, depth-1)
	}
	*a, *b, *c, *d = 1, 2, 3, 4
	manyPointersSink = nil
}

// An object that frozen frames held at one yield and no longer hold at the
// next must be collectable while the continuation is suspended again: a
// reused chunk must not keep the pointers of an earlier yield.
func TestDeadObjectCollectedWhileSuspended(t *testing.T) {
	s := scope.New("dead")
	var collected atomic.Bool
	stop := false
	c := continuation.New(s, func() {
		deadAfterYield(s, &collected)
		for !stop {
			continuation.Yield(s) // the big object is dead here
		}
	})
	c.Run() // suspended holding the object
	gcFlushCleanups(t)
	if collected.Load() {
		t.Fatal("the object was collected while a frozen frame held it")
	}
	c.Run() // suspended again, in the loop: the object is dead
	if !gcPollUntil(10*time.Second, collected.Load) {
		t.Fatal("an object dead at the current yield stays reachable from the suspended continuation")
	}
	stop = true
	c.Run()
	if !c.IsDone() {
		t.Fatal("not done")
	}
}
