package weft_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/scope"
)

// A goroutine's record of the continuation mounted on it (internal/gls)
// is set by Run and put back when Run returns, however the body leaves:
// by returning, yielding, panicking, runtime.Goexit, or a yield to an
// enclosing scope. A record left behind would be found by the next
// goroutine the runtime gives the same descriptor, and (kept in the
// goroutine's runtime.g, where the collector does not see it) would point
// at a freed continuation once collected. Thousands of goroutines end
// each way, their continuations dropped and collected, and every new
// goroutine must find nothing mounted.
//
// That the dropped continuations are collected is checked too: a test
// binary that kept them alive (through a test hook, say) could not see a
// record left pointing at a freed one.
func TestNoRecordOutlivesRun(t *testing.T) {
	outer, inner := scope.New("outer"), scope.New("inner")
	var droppedN, collected atomic.Int64
	drop := func(c *weft.Cont) { // dropped, counting c and its collection
		droppedN.Add(1)
		runtime.AddCleanup(c, func(n *atomic.Int64) { n.Add(1) }, &collected)
		dropped(c)
	}
	ways := []func(){
		func() { // returns
			weft.NewCont(inner, func() {}).Run(nil)
		},
		func() { // yields, and is dropped suspended
			c := weft.NewCont(inner, func() { weft.Yield(inner) })
			c.Run(nil)
			drop(c)
		},
		func() { // panics
			defer func() { recover() }()
			weft.NewCont(inner, func() { panic("boom") }).Run(nil)
		},
		func() { // yields, then panics on its resume
			defer func() { recover() }()
			c := weft.NewCont(inner, func() { weft.Yield(inner); panic("boom") })
			c.Run(nil)
			c.Run(nil)
		},
		func() { // ends the goroutine
			weft.NewCont(inner, func() { runtime.Goexit() }).Run(nil)
		},
		func() { // a nested continuation yields to the enclosing scope
			o := weft.NewCont(outer, func() {
				weft.NewCont(inner, func() { weft.Yield(outer) }).Run(nil)
			})
			o.Run(nil)
			if weft.Innermost() != nil {
				panic("a record is left after a yield to the enclosing scope")
			}
			drop(o)
		},
		func() { // the same, resumed to its end on another goroutine
			o := weft.NewCont(outer, func() {
				weft.NewCont(inner, func() { weft.Yield(outer); weft.Yield(inner) }).Run(nil)
			})
			o.Run(nil)
			done := make(chan bool)
			go func() {
				defer close(done)
				o.Run(nil)
				done <- weft.Innermost() == nil
			}()
			if !<-done {
				panic("a record is left after a resume on another goroutine")
			}
		},
		func() { // the same, abandoned suspended
			o := weft.NewCont(outer, func() {
				weft.NewCont(inner, func() { weft.Yield(outer) }).Run(nil)
			})
			o.Run(nil)
			abandon(o)
		},
	}
	for round := 0; round < 10; round++ {
		var wg sync.WaitGroup
		found := make(chan int, 640)
		for i := 0; i < 640; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if weft.Innermost() != nil {
					found <- -1
					return
				}
				defer func() {
					if weft.Innermost() != nil {
						found <- i % len(ways)
					}
				}()
				ways[i%len(ways)]()
			}()
		}
		wg.Wait()
		close(found)
		for w := range found {
			if w < 0 {
				t.Fatalf("round %d: a new goroutine found a continuation mounted on it", round)
			}
			t.Fatalf("round %d: way %d left a continuation mounted after its Run", round, w)
		}
		runtime.GC()
		runtime.GC()
	}
	for deadline := time.Now().Add(10 * time.Second); collected.Load() < droppedN.Load(); {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dropped continuations were collected", collected.Load(), droppedN.Load())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// dropped leaves c, suspended, to the collector on the stack-copying
// backend, where nothing else holds it; on the portable backend, where its
// body goroutine would wait for the rest of the test binary, it abandons
// it.
func dropped(c *weft.Cont) {
	if weft.ActiveBackend() == weft.Portable {
		abandon(c)
	}
}

// abandon abandons suspended c and waits until it has unwound.
func abandon(c *weft.Cont) {
	c.Abandon()
	deadline := time.Now().Add(10 * time.Second)
	for !c.IsDone() {
		if time.Now().After(deadline) {
			panic("an abandoned continuation did not unwind in 10s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}
