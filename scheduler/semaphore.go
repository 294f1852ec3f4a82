package scheduler

import (
	"context"
	"sync"
)

// A Semaphore is a weighted counting semaphore, like
// golang.org/x/sync/semaphore, whose Acquire parks a calling virtual
// thread instead of blocking its carrier. Waiters are served in FIFO
// order: a large request at the front is not overtaken by smaller ones
// behind it, so it cannot starve. Make one with NewSemaphore: the zero
// value has no tokens, so an Acquire of one or more waits for its
// context. A negative count, given to any of its methods or to
// NewSemaphore, panics.
type Semaphore struct {
	mu         sync.Mutex
	size, cur  int64
	head, tail *semWaiter
}

type semWaiter struct {
	w          *waiter
	n          int64
	prev, next *semWaiter
	queued     bool
}

// NewSemaphore returns a semaphore with n tokens.
func NewSemaphore(n int64) *Semaphore {
	if n < 0 {
		panic("scheduler: NewSemaphore with a negative size")
	}
	return &Semaphore{size: n}
}

// Acquire takes n tokens, waiting until they are available or ctx ends. It
// returns nil holding the tokens, or ctx.Err() holding none, as
// golang.org/x/sync/semaphore does:
//
//   - A ctx that has already ended when Acquire is called fails it at
//     once, even if the tokens are available.
//   - If ctx ends while Acquire waits, it returns ctx.Err().
//   - If the tokens are granted to a waiting Acquire as ctx ends (ctx has
//     ended by the time the woken Acquire looks), it gives them back,
//     waking the waiters they now satisfy, and returns ctx.Err().
//
// A request for more tokens than the semaphore has waits for ctx. A nil
// ctx panics.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	if n < 0 {
		panic("scheduler: Semaphore.Acquire with a negative count")
	}
	if ctx == nil {
		nilContext("Semaphore.Acquire")
	}
	done := ctx.Done()
	s.mu.Lock()
	select {
	case <-done:
		s.mu.Unlock()
		return ctx.Err()
	default:
	}
	if s.size-s.cur >= n && s.head == nil {
		s.cur += n
		s.mu.Unlock()
		return nil
	}
	if n > s.size {
		s.mu.Unlock()
		await(newWaiter(), ctx, -1) // nothing wakes it but ctx
		return ctx.Err()
	}
	sw := &semWaiter{w: newWaiter(), n: n}
	s.push(sw)
	s.mu.Unlock()
	if await(sw.w, ctx, -1) {
		select {
		case <-done:
			// Granted as ctx ended: give the tokens back and fail, as
			// x/sync does, so that an error always means no token is
			// held. The waiters behind may fit now.
			s.mu.Lock()
			s.cur -= n
			s.grant()
			s.mu.Unlock()
			return ctx.Err()
		default:
			return nil
		}
	}
	s.mu.Lock()
	if sw.queued {
		s.remove(sw)
		// Waiters behind it may fit now.
		s.grant()
	}
	s.mu.Unlock()
	return ctx.Err()
}

// TryAcquire takes n tokens if they are available and nobody is waiting,
// and reports whether it did.
func (s *Semaphore) TryAcquire(n int64) bool {
	if n < 0 {
		panic("scheduler: Semaphore.TryAcquire with a negative count")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size-s.cur >= n && s.head == nil {
		s.cur += n
		return true
	}
	return false
}

// Release returns n tokens and wakes the waiters they satisfy. It panics if
// more tokens are released than are held.
func (s *Semaphore) Release(n int64) {
	if n < 0 {
		panic("scheduler: Semaphore.Release with a negative count")
	}
	s.mu.Lock()
	if s.cur-n < 0 {
		s.mu.Unlock()
		panic("scheduler: Semaphore released more tokens than held")
	}
	s.cur -= n
	s.grant()
	s.mu.Unlock()
}

// grant hands tokens to waiters from the front of the queue while they
// fit. A waiter whose context has ended loses the race to be woken and is
// skipped. Called with s.mu held.
func (s *Semaphore) grant() {
	for sw := s.head; sw != nil; sw = s.head {
		if s.size-s.cur < sw.n {
			return
		}
		s.remove(sw)
		if sw.w.wake() {
			s.cur += sw.n
		}
	}
}

func (s *Semaphore) push(sw *semWaiter) {
	sw.queued = true
	sw.prev = s.tail
	if s.tail == nil {
		s.head = sw
	} else {
		s.tail.next = sw
	}
	s.tail = sw
}

func (s *Semaphore) remove(sw *semWaiter) {
	if sw.prev == nil {
		s.head = sw.next
	} else {
		sw.prev.next = sw.next
	}
	if sw.next == nil {
		s.tail = sw.prev
	} else {
		sw.next.prev = sw.prev
	}
	sw.prev, sw.next, sw.queued = nil, nil, false
}
