package scheduler

import (
	"container/heap"
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// detState is the deterministic mode's run queue and virtual clock. Its
// one carrier picks the next runnable virtual thread at random with a
// seeded generator. When nothing is runnable, the clock jumps to the
// next timer.
type detState struct {
	mu     sync.Mutex
	rng    *rand.Rand
	ready  []*VThread
	now    time.Duration // since the scheduler's epoch
	timers timerHeap
	seq    uint64
	// watches are the contexts virtual threads wait on, and the
	// scheduler's context that groups watch. They are in the order the
	// watches began (watchContext).
	watches []*ctxWatch
	// exited: the carrier has exited, the scheduler drained (exit). A
	// watch whose context ends after that runs in its AfterFunc's
	// goroutine.
	exited bool
}

// ctxWatch is a deterministic scheduler's watch on a context. f runs on
// the carrier at its first scheduling decision after ctx has ended. So a
// cancellation by one of the scheduler's virtual threads, a Group's say,
// takes effect at the same point of every run with the same seed.
// context.AfterFunc would run f on a goroutine of its own, whenever the
// Go runtime gets to it.
type ctxWatch struct {
	ctx  context.Context
	f    func()
	done bool        // fired or stopped; under detState.mu
	wake func() bool // stops the context.AfterFunc that wakes the carrier
}

// watchContext arranges for f to run once ctx ends, as
// context.AfterFunc(ctx, f) does. It returns a function that stops it
// and reports whether it did. In deterministic mode f runs on the
// carrier (see ctxWatch). A context cancelled from outside the scheduler
// wakes the idle carrier to run it. Once the carrier has exited, the
// scheduler drained, f runs as context.AfterFunc's would. It runs in the
// goroutine that wakes the carrier. For a context that had ended, it
// runs as the carrier exits (exit).
func (s *Scheduler) watchContext(ctx context.Context, f func()) (stop func() bool) {
	d := s.det
	if d == nil {
		return context.AfterFunc(ctx, f)
	}
	w := &ctxWatch{ctx: ctx, f: f}
	w.wake = context.AfterFunc(ctx, func() {
		d.mu.Lock()
		fire := d.exited && !w.done
		w.done = w.done || fire
		d.mu.Unlock()
		if fire {
			f()
			return
		}
		s.wakeOne()
	})
	d.mu.Lock()
	d.watches = append(d.watches, w)
	d.mu.Unlock()
	return func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		if w.done {
			return false
		}
		w.done = true
		w.wake()
		return true
	}
}

// exit records that the carrier exits, the scheduler having drained. It
// runs the watches whose contexts have ended. After exit, a watch's
// AfterFunc goroutine runs f (watchContext).
func (d *detState) exit() {
	d.mu.Lock()
	d.exited = true
	d.mu.Unlock()
	d.fireContexts()
}

// fireContexts runs the watches whose contexts have ended, in the order
// the waits began. It drops the ones that are done. It repeats while one
// ran: a watch's f may end the context of another, as a group's ends
// when the scheduler's does. That one must not wait for a later pick,
// which the clock's jump to a timer would precede.
func (d *detState) fireContexts() {
	for d.fireContextsOnce() {
	}
}

func (d *detState) fireContextsOnce() bool {
	d.mu.Lock()
	if len(d.watches) == 0 {
		d.mu.Unlock()
		return false
	}
	var due []*ctxWatch
	keep := d.watches[:0]
	for _, w := range d.watches {
		switch {
		case w.done:
		case w.ctx.Err() != nil:
			w.done = true
			due = append(due, w)
		default:
			keep = append(keep, w)
		}
	}
	clear(d.watches[len(keep):])
	d.watches = keep
	d.mu.Unlock()
	for _, w := range due {
		w.wake()
		w.f()
	}
	return len(due) > 0
}

func (d *detState) push(vt *VThread) {
	d.mu.Lock()
	d.ready = append(d.ready, vt)
	d.mu.Unlock()
}

func (d *detState) pop() *VThread {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.ready)
	if n == 0 {
		return nil
	}
	i := d.rng.IntN(n)
	vt := d.ready[i]
	d.ready[i] = d.ready[n-1]
	d.ready[n-1] = nil
	d.ready = d.ready[:n-1]
	return vt
}

// advance moves the clock to the earliest pending timer and fires every
// timer due then. It reports whether it fired any.
func (d *detState) advance() bool { return d.fire(true) }

// fireDue fires the timers already due at the clock's time, without
// moving the clock. Those were made with a duration of zero or less. The
// carrier calls it before every pick. So such a timer fires at once, as
// in real mode, not only once nothing else can run.
func (d *detState) fireDue() { d.fire(false) }

// fire fires every timer due at the clock's time. If jump, it first
// moves the clock to the earliest pending timer. It reports whether it
// fired any.
func (d *detState) fire(jump bool) bool {
	d.mu.Lock()
	for len(d.timers) > 0 && d.timers[0].stopped {
		heap.Pop(&d.timers)
	}
	if len(d.timers) == 0 || (!jump && d.timers[0].when > d.now) {
		d.mu.Unlock()
		return false
	}
	d.now = max(d.now, d.timers[0].when)
	var due []*vtimer
	for len(d.timers) > 0 && d.timers[0].when <= d.now {
		t := heap.Pop(&d.timers).(*vtimer)
		if !t.stopped {
			t.fired = true
			due = append(due, t)
		}
	}
	d.mu.Unlock()
	for _, t := range due {
		t.f()
	}
	return len(due) > 0
}

func (d *detState) afterFunc(dur time.Duration, f func()) *vtimer {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	when := d.now + max(dur, 0) // the clock never goes back
	if when < d.now {
		when = math.MaxInt64 // overflowed: as good as never
	}
	t := &vtimer{when: when, seq: d.seq, f: f, d: d}
	heap.Push(&d.timers, t)
	return t
}

// vtimer is a timer of the virtual clock.
type vtimer struct {
	when    time.Duration
	seq     uint64 // creation order, to break ties deterministically
	f       func()
	d       *detState
	stopped bool
	fired   bool
	index   int // in the heap; -1 once out of it
}

func (t *vtimer) Stop() bool {
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	// Out of the heap at once. Else a timeout that did not fire, as most
	// do not, would stay there with what its function holds until the
	// virtual clock reached it.
	if t.index >= 0 {
		heap.Remove(&t.d.timers, t.index)
	}
	return true
}

type timerHeap []*vtimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when != h[j].when {
		return h[i].when < h[j].when
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any)   { t := x.(*vtimer); t.index = len(*h); *h = append(*h, t) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
