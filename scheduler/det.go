package scheduler

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"time"
)

// detState is the deterministic mode's run queue and virtual clock. Its
// one carrier picks the next runnable virtual thread at random with a
// seeded generator; when nothing is runnable, the clock jumps to the next
// timer.
type detState struct {
	mu     sync.Mutex
	rng    *rand.Rand
	ready  []*VThread
	now    time.Duration // since the scheduler's epoch
	timers timerHeap
	seq    uint64
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
func (d *detState) advance(s *Scheduler) bool {
	d.mu.Lock()
	for len(d.timers) > 0 && d.timers[0].stopped {
		heap.Pop(&d.timers)
	}
	if len(d.timers) == 0 {
		d.mu.Unlock()
		return false
	}
	d.now = d.timers[0].when
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
	t := &vtimer{when: d.now + dur, seq: d.seq, f: f, d: d}
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
	index   int
}

func (t *vtimer) Stop() bool {
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
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
	return t
}
