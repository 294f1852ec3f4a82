package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// TestRunQueueModel drives a carrier's run queue with random pushes, pops,
// steals and unqueues, head moves and compactions included, against a
// plain slice that does what each is documented to do: push and pop at the
// tail, steal at the head, unqueue take a thread among the last
// maxUnqueueScan and move the tail into its place. Nothing may be lost,
// duplicated or reordered otherwise, and no slot outside the live part may
// keep a thread (the collector would keep it). Pushes are pushOwn's as
// often as push's: a thread queued alone goes into runnext, which is the
// queue's one thread then (checkRunQueue).
func TestRunQueueModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newCarrier(&Scheduler{}, 0, false)
	var model []*VThread
	pool := make([]*VThread, 300)
	for i := range pool {
		pool[i] = &VThread{id: uint64(i + 1)}
	}
	queued := map[*VThread]bool{}
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 4: // push one not queued
			vt := pool[rng.IntN(len(pool))]
			if queued[vt] {
				continue
			}
			if rng.IntN(2) == 0 {
				c.push(vt)
			} else {
				c.pushOwn(vt) // no carrier is idle: it wakes nobody
			}
			model = append(model, vt)
			queued[vt] = true
		case op < 6:
			got := c.pop()
			var want *VThread
			if len(model) > 0 {
				want, model = model[len(model)-1], model[:len(model)-1]
			}
			if got != want {
				t.Fatalf("step %d: pop got %v, want %v", step, got, want)
			}
			delete(queued, got)
		case op < 7:
			got := c.steal()
			var want *VThread
			if len(model) > 0 {
				want, model = model[0], model[1:]
			}
			if got != want {
				t.Fatalf("step %d: steal got %v, want %v", step, got, want)
			}
			delete(queued, got)
		default: // unqueue one of the pool, queued or not
			vt := pool[rng.IntN(len(pool))]
			i := slices.Index(model, vt)
			want := i >= 0 && i >= len(model)-maxUnqueueScan
			if got := c.unqueue(vt); got != want {
				t.Fatalf("step %d: unqueue of the thread at %d of %d: got %v, want %v", step, i, len(model), got, want)
			}
			if want {
				last := len(model) - 1
				model[i] = model[last]
				model = model[:last]
				delete(queued, vt)
			}
		}
		checkRunQueue(t, step, c, model)
	}
}

// checkRunQueue checks c's run queue, runnext included, against model, and
// that queued says what it holds.
func checkRunQueue(t *testing.T, step int, c *carrier, model []*VThread) {
	t.Helper()
	switch r := c.queued.Load(); {
	case r == queuedNone:
		if c.runnext != nil || len(c.queue) != c.head {
			t.Fatalf("step %d: queued says nothing is queued; runnext %v, queue %v", step, c.runnext, c.queue[c.head:])
		}
	case r == queuedInQueue:
		if c.runnext != nil || len(c.queue) == c.head {
			t.Fatalf("step %d: queued says the queue holds threads; runnext %v, queue %v", step, c.runnext, c.queue[c.head:])
		}
	case r == queuedTaking:
		t.Fatalf("step %d: queued is queuedTaking with no thief", step)
	default:
		if c.runnext == nil || c.runnext.id != r || len(c.queue) != c.head {
			t.Fatalf("step %d: queued says runnext holds thread %d alone; runnext %v, queue %v", step, r, c.runnext, c.queue[c.head:])
		}
		if len(model) != 1 || model[0] != c.runnext {
			t.Fatalf("step %d: runnext holds %v, want the queue %v", step, c.runnext, model)
		}
		model = nil // the queue itself is empty
	}
	checkQueue(t, step, c.queue, c.head, model)
}

// TestRunNextThieves has a carrier's goroutine queue threads, run them
// (pop) and take them back (unqueue), as spawns and hand-offs do, while
// thieves steal from it, runnext included: every thread is taken exactly
// once, none is lost, and queued and runnext agree at the end. Under -race it
// also checks that runnext, a plain field, is only touched by whoever queued
// says owns it.
func TestRunNextThieves(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	c := newCarrier(&Scheduler{}, 0, false)
	p := newRunNextPool(n)
	stop := make(chan struct{})
	var stolen atomic.Int64
	var wg sync.WaitGroup
	var started sync.WaitGroup
	for range 2 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if vt := c.steal(); vt != nil {
					stolen.Add(1)
					p.take(vt)
				}
			}
		}()
	}
	started.Wait()
	// Mostly one thread at a time, as a spawn that is joined or a
	// hand-off queues; now and then a few, which go to queue.
	p.drive(c, rand.New(rand.NewPCG(5, 6)), 8, 5, nil)
	close(stop)
	wg.Wait()
	p.finish(t, c)
	t.Logf("thieves took %d of %d threads", stolen.Load(), n)
}

// runNextPool is n threads, with IDs 1 to n, for the runnext tests, and
// how often each has been taken off a carrier.
type runNextPool struct {
	vts   []*VThread
	taken []atomic.Int32
}

func newRunNextPool(n int) *runNextPool {
	p := &runNextPool{vts: make([]*VThread, n), taken: make([]atomic.Int32, n)}
	for i := range p.vts {
		p.vts[i] = &VThread{id: uint64(i + 1)}
	}
	return p
}

// take counts vt as taken; nil is nothing taken.
func (p *runNextPool) take(vt *VThread) {
	if vt != nil {
		p.taken[vt.id-1].Add(1)
	}
}

// drive is c's own goroutine: it queues the pool's threads on c with
// pushOwn, one at a time, or, one time in moreOneIn, up to maxMore at
// once, and takes each batch back, newest first, by pop or unqueue at
// random. spin, if not nil, is called with a random count between the
// steps, to widen the windows thieves race.
func (p *runNextPool) drive(c *carrier, rng *rand.Rand, moreOneIn, maxMore int, spin func(int)) {
	dawdle := func() {
		if spin != nil {
			spin(rng.IntN(40) * rng.IntN(2))
		}
	}
	for i, n := 0, len(p.vts); i < n; {
		k := 1
		if rng.IntN(moreOneIn) == 0 {
			k = 1 + rng.IntN(maxMore)
		}
		batch := p.vts[i:min(i+k, n)]
		i += len(batch)
		for _, vt := range batch {
			c.pushOwn(vt)
			dawdle()
		}
		for j := len(batch) - 1; j >= 0; j-- {
			dawdle()
			if rng.IntN(2) == 0 {
				if c.unqueue(batch[j]) {
					p.take(batch[j])
				}
			} else {
				p.take(c.pop())
			}
		}
	}
}

// finish takes what is left on c, once the thieves have stopped, and
// checks that every thread was taken exactly once and that c's queue and
// runnext agree.
func (p *runNextPool) finish(t *testing.T, c *carrier) {
	t.Helper()
	for vt := c.pop(); vt != nil; vt = c.pop() {
		p.take(vt)
	}
	for i := range p.taken {
		if got := p.taken[i].Load(); got != 1 {
			t.Fatalf("thread %d taken %d times, want 1", i+1, got)
		}
	}
	checkRunQueue(t, len(p.vts), c, nil)
}

// checkQueue checks a queue kept as q[head:] against model, and that no
// slot of q's array outside the live part keeps a thread (the collector
// would keep it).
func checkQueue(t *testing.T, step int, q []*VThread, head int, model []*VThread) {
	t.Helper()
	if live := q[head:]; !slices.Equal(live, model) {
		t.Fatalf("step %d: queue %v, want %v", step, live, model)
	}
	for i, vt := range q[:head] {
		if vt != nil {
			t.Fatalf("step %d: slot %d below the head keeps %v", step, i, vt)
		}
	}
	for i, vt := range q[len(q):cap(q)] {
		if vt != nil {
			t.Fatalf("step %d: slot %d past the tail keeps %v", step, len(q)+i, vt)
		}
	}
}

// TestGlobalQueueModel drives the global queue with random bursts of
// appends and pops against a plain FIFO slice: nothing lost or reordered
// through the head's moves, the compactions and the reuse of the array; no
// slot outside the live part keeps a thread; nglobal says the length; an
// emptied queue keeps a small array (a trickle allocates nothing) and
// drops a large one.
func TestGlobalQueueModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := &Scheduler{}
	var model []*VThread
	next := uint64(0)
	check := func(step int) {
		t.Helper()
		checkQueue(t, step, s.global, s.ghead, model)
		if n := s.nglobal.Load(); int(n) != len(model) {
			t.Fatalf("step %d: nglobal %d, want %d", step, n, len(model))
		}
	}
	for step := range 5000 {
		// Bursts of either kind, some long, so that the queue both
		// empties often and runs long without emptying.
		n := 1 + rng.IntN(8)
		if rng.IntN(50) == 0 {
			n = 2000
		}
		if rng.IntN(2) == 0 {
			for range n {
				next++
				vt := &VThread{id: next}
				s.appendGlobal(vt)
				model = append(model, vt)
			}
		} else {
			for range n {
				got := s.popGlobal()
				var want *VThread
				if len(model) > 0 {
					want, model = model[0], model[1:]
				}
				if got != want {
					t.Fatalf("step %d: popGlobal got %v, want %v", step, got, want)
				}
			}
		}
		check(step)
		if len(model) == 0 && cap(s.global) > maxKeptGlobal {
			t.Fatalf("step %d: the empty queue keeps an array of %d", step, cap(s.global))
		}
	}

	// After a burst, a queue that never empties again does not keep the
	// burst's array.
	for range 5000 {
		s.appendGlobal(&VThread{})
	}
	for range 20000 {
		s.appendGlobal(&VThread{})
		s.popGlobal()
		s.popGlobal()
		if s.nglobal.Load() < 10 {
			s.appendGlobal(&VThread{})
		}
	}
	if n := s.nglobal.Load(); n == 0 || n > 20 {
		t.Fatalf("the queue holds %d threads: the test tests nothing", n)
	}
	if c := cap(s.global); c > maxKeptGlobal {
		t.Errorf("a queue of %d threads, never empty since a burst of 5,000, keeps an array of %d", s.nglobal.Load(), c)
	}
	for s.popGlobal() != nil {
	}

	// A trickle through an emptied queue reuses its array.
	for range 3 {
		s.appendGlobal(&VThread{})
		s.popGlobal()
	}
	if allocs := testing.AllocsPerRun(100, func() {
		s.appendGlobal(&VThread{id: 1})
		s.popGlobal()
	}); allocs > 1 { // the VThread itself
		t.Errorf("append and pop on an empty queue: %v allocations, want 1 (the thread)", allocs)
	}
}

// A virtual thread queued into runnext while no carrier is idle wakes
// nobody and is owed to nobody (pushOwn): a carrier that goes idle after
// the push must find it there (hasWork) and take it (steal), or it waits
// for as long as its own carrier is busy. The other carrier is held just
// before it goes idle while the push happens; then the pushing carrier is
// blocked, as a system call would block it.
func TestRunNextSeenByCarrierGoingIdle(t *testing.T) {
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		testHooks.sleepBeforeIdle.Store(nil)
	}()
	waitUntil(t, "both carriers to sleep", func() bool { return s.nidle.Load() == 2 })
	var other atomic.Pointer[carrier]
	var armed atomic.Bool
	atIdle, pushed := make(chan struct{}), make(chan struct{})
	beforeIdle := func(c *carrier) {
		if c == other.Load() && armed.CompareAndSwap(true, false) {
			close(atIdle)
			<-pushed
		}
	}
	testHooks.sleepBeforeIdle.Store(&beforeIdle)
	var stranded atomic.Bool
	m := goOrFatal(t, s, func(ctx context.Context) error {
		c1 := Current().carrier
		for _, c := range s.carriers {
			if c != c1 {
				other.Store(c)
			}
		}
		armed.Store(true)
		// Wakes the other carrier, which runs it and goes idle again,
		// into the hook.
		go s.Go(func(ctx context.Context) error { return nil })
		<-atIdle
		if n := s.nidle.Load(); n != 0 {
			return fmt.Errorf("%d carriers idle at the push, want 0", n)
		}
		ran := make(chan struct{})
		x, err := s.Go(func(ctx context.Context) error { close(ran); return nil })
		if err != nil {
			return err
		}
		if r := c1.queued.Load(); r != x.id {
			return fmt.Errorf("queued = %#x after the spawn, want the new thread's ID %d", r, x.id)
		}
		close(pushed)
		select { // blocks the carrier
		case <-ran:
		case <-time.After(2 * time.Second):
			stranded.Store(true)
		}
		return nil
	})
	if err := joinWithin(t, m); err != nil {
		t.Fatal(err)
	}
	if stranded.Load() {
		t.Fatal("a thread in runnext waited 2s while another carrier went to sleep")
	}
}

// A continuation that a virtual thread ran and dropped while suspended is
// abandoned by the collector: its deferred calls run on a goroutine that
// Abandon starts. On the portable backend (every -race build, and every
// platform but linux/amd64) Current() there returned, before 1159fc7, the
// virtual thread that last ran it, if that thread was running then, so an
// Unpark there queued with pushOwn on that thread's carrier, from a
// goroutine that is not the carrier's, and the runnext slot was filled by
// several goroutines at once. Current() is nil there now (the Unparks go
// to the global queue); every parked thread must still be woken exactly
// once.
func TestRunNextForeignPushFromAbandonedDefer(t *testing.T) {
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !t.Failed() { // a stranded thread would keep Close waiting
			s.Close()
		}
	}()
	us := scope.New("user")
	const n = 400
	var woke atomic.Int32
	parked := make([]*VThread, n)
	for i := range parked {
		parked[i] = goOrFatal(t, s, func(ctx context.Context) error {
			Park()
			woke.Add(1)
			return nil
		})
	}
	waitUntil(t, "every thread to park", func() bool {
		for _, p := range parked {
			if p.state.Load() != vtParked {
				return false
			}
		}
		return true
	})
	var foreign atomic.Int32
	m := goOrFatal(t, s, func(ctx context.Context) error {
		me := Current()
		func() {
			for _, p := range parked {
				k := continuation.New(us, func() {
					defer func() {
						if Current() == me {
							foreign.Add(1)
						}
						p.Unpark()
					}()
					continuation.Yield(us)
				})
				k.Run() // suspended, and dropped
			}
		}()
		// Runs on its carrier while the collector abandons them.
		for deadline := time.Now().Add(3 * time.Second); woke.Load() < n && time.Now().Before(deadline); {
			runtime.GC()
		}
		return nil
	})
	if err := joinWithin(t, m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for woke.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d of %d Unparks ran where Current() was the running thread on another goroutine", foreign.Load(), n)
	if got := woke.Load(); got != n {
		var b []byte
		for _, c := range s.carriers {
			c.mu.Lock()
			b = fmt.Appendf(b, "carrier %d queue=%d queued=%#x runnext=%v\n", c.id, len(c.queue)-c.head, c.queued.Load(), c.runnext)
			c.mu.Unlock()
		}
		stranded := 0
		for _, p := range parked {
			if p.state.Load() == vtQueued {
				stranded++
			}
		}
		t.Fatalf("%d of %d parked threads ran after their Unpark; %d stranded queued\n%s", got, n, stranded, b)
	}
}

// TestRunNextContended is TestRunNextThieves with thieves that spin on queued
// and steal only while something is queued, and an owner that dawdles
// between its push and its take, so that most takes race a thief: the
// pop/unqueue compare-and-swap against the thief's queuedTaking, moveRunnext
// against a thief waiting for the lock, and pushOwn's fast path right after
// a thief's store of queuedNone. Every thread is taken exactly once.
func TestRunNextContended(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	c := newCarrier(&Scheduler{}, 0, false)
	p := newRunNextPool(n)
	stop := make(chan struct{})
	var stolen, stolenSlot atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i%64 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				r := c.queued.Load()
				if r == queuedNone {
					if i%16 == 0 {
						runtime.Gosched() // one CPU: let the owner on
					}
					continue
				}
				if vt := c.steal(); vt != nil {
					stolen.Add(1)
					if r != queuedInQueue {
						stolenSlot.Add(1)
					}
					p.take(vt)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 8))
	spin := func(k int) {
		for range k {
			if rng.IntN(4096) == 0 {
				runtime.Gosched()
			}
		}
	}
	p.drive(c, rng, 4, 4, spin)
	close(stop)
	wg.Wait()
	p.finish(t, c)
	t.Logf("thieves took %d of %d threads, %d of them from runnext", stolen.Load(), n, stolenSlot.Load())
}

// TestRunNextSpawnJoinSteal runs spawn-and-join chains and channel
// hand-offs on every carrier at once, so that runnext is filled and taken
// by its carrier (pop, and unqueue in a nested Join on the stack-copying
// backend) while other carriers, idle for want of work, steal it: every
// child runs exactly once, and every Join and hand-off returns.
func TestRunNextSpawnJoinSteal(t *testing.T) {
	s, err := New(Options{Carriers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const workers = 8
	rounds := 20000
	if raceEnabled {
		rounds = 4000 // each thread costs the detector ~5 KB for good (docs/limitations.md)
	}
	var ran atomic.Int64
	var started atomic.Int64
	ws := make([]*VThread, 0, workers+2)
	for w := range workers {
		ws = append(ws, goOrFatal(t, s, func(ctx context.Context) error {
			for i := range rounds {
				started.Add(1)
				x, err := s.Go(func(ctx context.Context) error {
					ran.Add(1)
					if (i+w)%7 == 0 {
						Yield()
					}
					return nil
				})
				if err != nil {
					return err
				}
				if i%5 == 0 {
					runtime.Gosched() // the slot sits full a while
				}
				if err := x.Join(); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	// A ping-pong pair: each hand-off queues the partner into runnext.
	ping, pong := NewChan[int](0), NewChan[int](0)
	ws = append(ws, goOrFatal(t, s, func(ctx context.Context) error {
		for i := range rounds {
			ping.Send(i)
			if v, _ := pong.Recv(); v != i {
				return fmt.Errorf("pong %d, want %d", v, i)
			}
		}
		ping.Close()
		return nil
	}), goOrFatal(t, s, func(ctx context.Context) error {
		for v, ok := ping.Recv(); ok; v, ok = ping.Recv() {
			pong.Send(v)
		}
		return nil
	}))
	done := make(chan struct{})
	errs := make([]error, len(ws))
	go func() {
		for i, w := range ws {
			errs[i] = w.Join()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("stuck: %d of %d children ran", ran.Load(), started.Load())
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("%v: %v", ws[i], err)
		}
	}
	if ran.Load() != started.Load() {
		t.Fatalf("%d children ran, %d started", ran.Load(), started.Load())
	}
}
