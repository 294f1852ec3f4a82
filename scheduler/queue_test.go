package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRunQueueModel drives a carrier's run queue with random pushes, pops,
// steals and unqueues, head moves and compactions included, against a
// plain slice that does what each is documented to do: push and pop at the
// tail, steal at the head, unqueue take a thread among the last
// maxUnqueueScan and move the tail into its place. Nothing may be lost,
// duplicated or reordered otherwise, and no slot outside the live part may
// keep a thread (the collector would keep it).
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
			c.push(vt)
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
		checkQueue(t, step, c.queue, c.head, model)
	}
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
