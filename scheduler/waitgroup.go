package scheduler

import (
	"context"
	"sync"
)

// A WaitGroup waits for a collection of tasks to finish, like
// sync.WaitGroup, but Wait parks a calling virtual thread instead of
// blocking its carrier. The zero value is usable. A WaitGroup must not be
// copied after first use.
//
// As with sync.WaitGroup, an Add that raises the counter from zero must
// happen before the Waits meant to wait for it: a Wait that races with
// it may return at once. Unlike sync.WaitGroup, a WaitGroup may be reused
// (an Add after the counter reached zero) before the Waits of the last
// round have returned, and nothing panics: each Wait was released, and
// taken off the queue, when the counter reached zero, so it returns
// whatever the next round does, and the next round's Waits wait for that
// round.
type WaitGroup struct {
	mu sync.Mutex
	n  int64
	q  waitList
}

// Add adds delta, which may be negative, to the counter. When the counter
// reaches zero, every Wait returns. It panics if the counter goes
// negative.
func (wg *WaitGroup) Add(delta int) {
	wg.mu.Lock()
	wg.n += int64(delta)
	if wg.n < 0 {
		wg.n -= int64(delta)
		wg.mu.Unlock()
		panic("scheduler: negative WaitGroup counter")
	}
	var ws *waiter
	if wg.n == 0 {
		ws = wg.q.takeAll()
	}
	wg.mu.Unlock()
	wakeChain(ws)
}

// Done decrements the counter by one.
func (wg *WaitGroup) Done() { wg.Add(-1) }

// Wait waits until the counter is zero.
func (wg *WaitGroup) Wait() {
	wg.mu.Lock()
	if wg.n == 0 {
		wg.mu.Unlock()
		return
	}
	w := newWaiter()
	wg.q.pushBack(w)
	wg.mu.Unlock()
	w.wait()
}

// Go adds one to the counter and starts fn in a virtual thread of s, which
// calls Done when fn returns or panics. If s is closed it returns
// ErrClosed and leaves the counter as it was.
func (wg *WaitGroup) Go(s *Scheduler, fn func(ctx context.Context) error) (*VThread, error) {
	if fn == nil {
		panic("scheduler.WaitGroup.Go: nil function")
	}
	if s == nil || s.ctx == nil {
		// Before the Add: s.Go would panic after it, and leave the
		// counter raised for good.
		unusable(s, "WaitGroup.Go with")
	}
	wg.Add(1)
	vt, err := s.Go(func(ctx context.Context) error {
		defer wg.Done()
		return fn(ctx)
	})
	if err != nil {
		wg.Done()
	}
	return vt, err
}
