package bench

import (
	"iter"
	"runtime"
	"sync"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

const (
	// memCount is how many units each memory measurement suspends.
	memCount = 10_000
	// memDepth is the stack depth they are suspended at.
	memDepth = 3
)

// A suspender holds many suspended units of one kind.
type suspender struct {
	name string
	// prepare allocates whatever holds n units (so that the holder is not
	// measured) and returns suspend, which creates the n units and runs
	// each to its first suspension at memDepth, and end, which finishes
	// them all and waits for their goroutines to exit.
	prepare func(n int) (suspend, end func())
}

var suspenders = []suspender{
	{"weft", prepareWeft},
	{"weft.Pull", prepareWeftPull},
	{"iter.Pull", prepareIterPull},
	{"goroutine", prepareGoroutines},
}

// prepareWeft: continuations sharing one scope, each suspended in
// continuation.Yield.
func prepareWeft(n int) (suspend, end func()) {
	conts := make([]*continuation.Continuation, n)
	s := scope.New("bench")
	stop := false
	body := func() {
		recurse(memDepth, func() {
			for !stop {
				continuation.Yield(s)
			}
		})
	}
	suspend = func() {
		for i := range conts {
			c := continuation.New(s, body)
			c.Run()
			conts[i] = c
		}
	}
	end = func() {
		stop = true
		for i, c := range conts {
			c.Run()
			if !c.IsDone() {
				panic("bench: weft continuation did not finish")
			}
			conts[i] = nil
		}
	}
	return suspend, end
}

// preparePull: pull iterators over loopSeq, each suspended after its first
// value. The sequences share one yield counter: nobody reads it here.
func preparePull(pull func(iter.Seq[int]) (func() (int, bool), func())) func(n int) (suspend, end func()) {
	return func(n int) (suspend, end func()) {
		nexts := make([]func() (int, bool), n)
		stops := make([]func(), n)
		yields := 0
		seq := loopSeq(memDepth, nil, &yields)
		suspend = func() {
			for i := range nexts {
				nexts[i], stops[i] = pull(seq)
				nexts[i]()
			}
		}
		end = func() {
			for i := range stops {
				stops[i]()
				nexts[i], stops[i] = nil, nil
			}
		}
		return suspend, end
	}
}

var (
	prepareWeftPull = preparePull(continuation.Pull[int])
	prepareIterPull = preparePull(iter.Pull[int])
)

// prepareGoroutines: goroutines parked receiving from one channel.
func prepareGoroutines(n int) (suspend, end func()) {
	release := make(chan struct{})
	var started, done sync.WaitGroup
	suspend = func() {
		started.Add(n)
		done.Add(n)
		for range n {
			go func() {
				defer done.Done()
				recurse(memDepth, func() {
					started.Done()
					<-release
				})
			}()
		}
		started.Wait()
	}
	end = func() {
		close(release)
		done.Wait()
	}
	return suspend, end
}

// warmGoroutines makes n goroutines exist at once and then exit, so that
// the runtime's free list holds at least n goroutine descriptors. The
// runtime never frees a descriptor (runtime.g: a 480-byte size class on
// amd64, about 530 B a goroutine with the runtime's list of them), and
// reuses free ones for new goroutines, so without this the first
// measurement in a process would count the descriptors and later ones
// would not. With it, no measurement counts them.
func warmGoroutines(n int) {
	suspend, end := prepareGoroutines(n)
	suspend()
	end()
}

// inUse returns the heap and stack memory in use after a full collection.
func inUse() (heap, stack int64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse), int64(m.StackInuse)
}

// settledInUse is inUse once the garbage of an earlier batch is all gone.
// A collection does not free everything unreachable: an object that a
// cleanup (runtime.AddCleanup) refers to, such as the engine record of a
// dropped continuation, lives until the cleanup has run on the runtime's
// cleanup goroutines, and a baseline taken before that would make the
// next batch look smaller by what those cleanups free while it is
// measured. So wait for a cleanup queued after the batch's, then collect
// until the heap stops shrinking.
func settledInUse() (heap, stack int64) {
	runtime.GC() // queue the cleanups of what the last batch dropped
	done := make(chan struct{})
	sentinel := new(struct{ p *int }) // has a pointer: not tiny-allocated
	runtime.AddCleanup(sentinel, func(done chan struct{}) { close(done) }, done)
	sentinel = nil
	runtime.GC()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	heap, stack = inUse()
	for range 10 {
		runtime.Gosched()
		h, s := inUse()
		if h+s >= heap+stack {
			return heap, stack
		}
		heap, stack = h, s
	}
	return heap, stack
}

// measureSuspended suspends n units of kind s and returns the heap and
// stack memory they hold and the time it took to create and suspend them;
// it ends them before returning. The collector runs as usual while they
// are created: the time includes the collections their allocations
// trigger (each of which scans every stack suspended so far), and the
// memory is packed as a running program's would be.
func measureSuspended(s suspender, n int) (heap, stack int64, elapsed time.Duration) {
	suspend, end := s.prepare(n)
	heap0, stack0 := settledInUse()
	t0 := time.Now()
	suspend()
	elapsed = time.Since(t0)
	heap1, stack1 := inUse()
	end()
	return heap1 - heap0, stack1 - stack0, elapsed
}
