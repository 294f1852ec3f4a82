package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the synchronisation types. Each keeps its waiters in a
// queue guarded by a short internal sync.Mutex, which is held only while
// the queue and the type's state are changed, never while anyone waits: a
// waiter is queued under the lock, the lock is released, and only then
// does the waiter park (a virtual thread) or block (a plain goroutine). The
// side that releases the waiter takes it off the queue under the lock and
// wakes it, so a wake-up that comes before the park is not lost (the
// virtual thread's permit, or the goroutine's buffered channel, keeps it).

// expire ends w's wait the way its timeout does, unless w has been woken
// first; it reports whether it did. Context cancellation uses it.
func expire(w *waiter) bool {
	if w.state.CompareAndSwap(waiting, timedOut) {
		w.signal()
		return true
	}
	return false
}

// await blocks until w is woken, ctx (if not nil) ends or d passes (d < 0:
// no timeout), and reports whether w was woken. Whoever wakes w has
// finished with it; a wait that ended otherwise may still find w queued.
func await(w *waiter, ctx context.Context, d time.Duration) bool {
	if w.vt != nil && d < 0 && (ctx == nil || ctx.Done() == nil) {
		return w.parkUntilWoken()
	}
	var stop func() bool
	if ctx != nil && ctx.Done() != nil {
		if w.vt != nil {
			stop = w.vt.s.watchContext(ctx, func() { expire(w) })
		} else {
			stop = context.AfterFunc(ctx, func() { expire(w) })
		}
	}
	w.waitFor(d)
	if stop != nil {
		stop()
	}
	// Not waitFor's result: with d < 0 it does not expect expire.
	return w.state.Load() == woken
}

// waitList is a FIFO queue of waiters linked through waiter.next.
type waitList struct {
	head, tail *waiter
}

func (l *waitList) empty() bool { return l.head == nil }

func (l *waitList) pushBack(w *waiter) {
	w.next = nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
}

func (l *waitList) pushFront(w *waiter) {
	w.next = l.head
	l.head = w
	if l.tail == nil {
		l.tail = w
	}
}

func (l *waitList) popFront() *waiter {
	w := l.head
	if w == nil {
		return nil
	}
	l.head = w.next
	if l.head == nil {
		l.tail = nil
	}
	w.next = nil
	return w
}

// remove takes w out of the list, and reports whether it was there. It
// walks the list: for the rare paths only.
func (l *waitList) remove(w *waiter) bool {
	var prev *waiter
	for x := l.head; x != nil; prev, x = x, x.next {
		if x != w {
			continue
		}
		if prev == nil {
			l.head = x.next
		} else {
			prev.next = x.next
		}
		if l.tail == x {
			l.tail = prev
		}
		x.next = nil
		return true
	}
	return false
}

// takeAll empties the list and returns its waiters, still linked through
// next; wakeChain wakes such a chain.
func (l *waitList) takeAll() *waiter {
	w := l.head
	l.head, l.tail = nil, nil
	return w
}

func wakeChain(w *waiter) {
	for w != nil {
		next := w.next
		w.next = nil
		w.wake()
		w = next
	}
}

// clockNow is the clock a waiter measures its wait with: the scheduler's
// for a virtual thread (virtual in deterministic mode, so that behaviour
// that depends on how long something waited stays reproducible), the wall
// clock for a goroutine.
func clockNow(w *waiter) time.Time {
	if w.vt != nil {
		return w.vt.s.Now()
	}
	return time.Now()
}

// Mutex state bits.
const (
	mutexLocked   int32 = 1 << iota // held, or being handed to a waiter
	mutexWaiters                    // the wait queue is not empty
	mutexStarving                   // handoff mode: Unlock passes the lock to the first waiter
	mutexHanded                     // handed to a waiter that has not woken to take it yet
)

// starvationThreshold is how long a waiter may wait before a Mutex goes
// into handoff mode.
const starvationThreshold = time.Millisecond

// A Mutex is a mutual exclusion lock for virtual threads and goroutines. A
// virtual thread that has to wait for it parks, leaving its carrier free
// for other virtual threads; a plain goroutine blocks. The zero value is an
// unlocked mutex. A Mutex must not be copied after first use. As with
// sync.Mutex, a Mutex is not tied to the virtual thread or goroutine that
// locked it: another one may unlock it.
//
// Fairness: Mutex lets a locker barge. Unlock frees the lock and wakes the
// first waiter, which competes for it with virtual threads and goroutines
// that are just arriving (they are running already, so this keeps the lock
// busy instead of idle while the woken waiter is being scheduled). A woken
// waiter that loses goes back to the front of the queue. Once a waiter has
// waited longer than 1 ms (by the scheduler's clock for a virtual thread;
// in deterministic mode, as soon as a woken waiter loses, since its clock
// stands still while virtual threads run), the mutex switches to handoff
// mode: Unlock hands the lock directly to the
// first waiter, in FIFO order, and newcomers queue behind. It switches back
// when the queue empties, or when a waiter it hands the lock to had waited
// less than 1 ms (not in deterministic mode, where waits take no time on
// its clock). So no waiter starves, the lock goes back to barging once
// waits are short again, and the common uncontended case is one
// compare-and-swap.
type Mutex struct {
	state atomic.Int32
	mu    sync.Mutex // guards q and every change of the waiter and starving bits
	q     waitList
}

// Lock locks m. If m is locked, the calling virtual thread parks (a plain
// goroutine blocks) until it is available.
func (m *Mutex) Lock() {
	if m.state.CompareAndSwap(0, mutexLocked) {
		return
	}
	m.lockSlow()
}

func (m *Mutex) lockSlow() {
	var w *waiter
	var start time.Time
	requeue := false
	for {
		m.mu.Lock()
		s := m.state.Load()
		if s&mutexLocked == 0 {
			// Free (it is never free in handoff mode): take it.
			if m.state.CompareAndSwap(s, s|mutexLocked) {
				m.mu.Unlock()
				return
			}
			m.mu.Unlock()
			continue
		}
		ns := s | mutexWaiters
		if w != nil && (clockNow(w).Sub(start) >= starvationThreshold || w.vt != nil && w.vt.s.det != nil) {
			// It has waited long enough, or is a woken waiter that
			// lost in deterministic mode, whose clock moves only when
			// every virtual thread waits for a timer, and might never
			// while the holder keeps relocking.
			ns |= mutexStarving
		}
		// The compare-and-swap fails if the holder unlocked in the
		// meantime: look again instead of waiting for an Unlock that has
		// been and gone.
		if !m.state.CompareAndSwap(s, ns) {
			m.mu.Unlock()
			continue
		}
		if w == nil {
			w = newWaiter()
			start = clockNow(w)
		} else {
			w = &waiter{vt: w.vt, ch: w.ch}
		}
		if requeue {
			m.q.pushFront(w)
		} else {
			m.q.pushBack(w)
		}
		m.mu.Unlock()
		w.wait()
		if w.ok {
			// Handed over in handoff mode: the lock is ours now, and
			// an Unlock from here on is ours to make. A waiter that
			// had not waited long ends the mode, as sync.Mutex does:
			// under steady contention every Unlock would otherwise be
			// a hand-off, a park and an unpark, where barging keeps
			// the lock busy.
			if clockNow(w).Sub(start) < starvationThreshold && (w.vt == nil || w.vt.s.det == nil) {
				m.mu.Lock()
				// The locked and handed bits are ours; the others
				// change only under m.mu.
				m.state.Store(m.state.Load() &^ (mutexStarving | mutexHanded))
				m.mu.Unlock()
			} else {
				// Without m.mu: a waiter's compare-and-swap under it
				// fails and looks again.
				m.state.And(^mutexHanded)
			}
			return
		}
		requeue = true
	}
}

// TryLock locks m if it is free and reports whether it did; it never
// waits. It fails in handoff mode, where the lock belongs to the waiters.
func (m *Mutex) TryLock() bool {
	for {
		s := m.state.Load()
		if s&(mutexLocked|mutexStarving) != 0 {
			return false
		}
		if m.state.CompareAndSwap(s, s|mutexLocked) {
			return true
		}
	}
}

// Unlock unlocks m, waking a waiter if there is one. It panics if m is not
// locked. As with sync.Mutex, an Unlock more than a Lock is caught if m is
// free, or handed to a waiter that has not taken it yet (handoff mode); one
// that comes after another virtual thread or goroutine has taken the lock
// unlocks that one's lock.
func (m *Mutex) Unlock() {
	if m.state.CompareAndSwap(mutexLocked, 0) {
		return
	}
	m.unlockSlow()
}

func (m *Mutex) unlockSlow() {
	m.mu.Lock()
	// Nothing else changes the state now: the locked bit is ours, and the
	// other bits change only under m.mu.
	s := m.state.Load()
	if s&mutexLocked == 0 || s&mutexHanded != 0 {
		// Free, or handed to a waiter: its Unlock comes after it wakes.
		m.mu.Unlock()
		panic("scheduler: Unlock of unlocked Mutex")
	}
	w := m.q.popFront()
	switch {
	case w == nil:
		m.state.Store(0)
	case s&mutexStarving != 0:
		// Handoff: the lock stays locked, now on w's behalf, and w
		// clears mutexHanded once it has woken to take it.
		if m.q.empty() {
			m.state.Store(mutexLocked | mutexHanded)
		} else {
			m.state.Store(mutexLocked | mutexHanded | mutexWaiters | mutexStarving)
		}
		w.ok = true
	default:
		if m.q.empty() {
			m.state.Store(0)
		} else {
			m.state.Store(mutexWaiters)
		}
		w.ok = false
	}
	m.mu.Unlock()
	if w != nil {
		w.wake()
	}
}

// An RWMutex is a reader/writer mutual exclusion lock for virtual threads
// and goroutines: any number of readers or one writer. Waiting virtual
// threads park; waiting goroutines block. The zero value is an unlocked
// mutex. An RWMutex must not be copied after first use.
//
// Fairness: writers are preferred. Once a writer is waiting, new readers
// wait too, so a stream of overlapping readers cannot starve a writer: it
// gets the lock when the readers already inside leave. When a writer
// unlocks, every reader that queued meanwhile is let in together, before
// the next writer, so writers cannot starve readers either. Waiting
// writers are served in FIFO order. The lock is handed over: a woken
// waiter already holds it. As with sync.RWMutex, a reader must not take
// the read lock again while holding it (recursive read locking deadlocks
// once a writer waits).
type RWMutex struct {
	mu      sync.Mutex
	readers int  // readers holding the lock
	writer  bool // a writer holds the lock
	rq, wq  waitList
	// handed says the write lock was handed to a waiting writer that
	// has not woken to take it yet; that writer clears it.
	handed atomic.Bool
}

// RLock locks rw for reading. It waits while a writer holds the lock or is
// waiting for it.
func (rw *RWMutex) RLock() {
	rw.mu.Lock()
	if !rw.writer && rw.wq.empty() {
		rw.readers++
		rw.mu.Unlock()
		return
	}
	w := newWaiter()
	rw.rq.pushBack(w)
	rw.mu.Unlock()
	w.wait() // woken holding a read lock
}

// TryRLock locks rw for reading if it can do so without waiting, and
// reports whether it did.
func (rw *RWMutex) TryRLock() bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.writer || !rw.wq.empty() {
		return false
	}
	rw.readers++
	return true
}

// RUnlock undoes one RLock. It panics if rw is not locked for reading.
func (rw *RWMutex) RUnlock() {
	rw.mu.Lock()
	if rw.readers <= 0 {
		rw.mu.Unlock()
		panic("scheduler: RUnlock of unlocked RWMutex")
	}
	rw.readers--
	var w *waiter
	if rw.readers == 0 {
		if w = rw.wq.popFront(); w != nil {
			rw.writer = true
			rw.handed.Store(true)
		}
	}
	rw.mu.Unlock()
	if w != nil {
		w.wake()
	}
}

// Lock locks rw for writing, waiting until no reader or writer holds it.
func (rw *RWMutex) Lock() {
	rw.mu.Lock()
	if !rw.writer && rw.readers == 0 && rw.wq.empty() {
		rw.writer = true
		rw.mu.Unlock()
		return
	}
	w := newWaiter()
	rw.wq.pushBack(w)
	rw.mu.Unlock()
	w.wait() // woken holding the write lock
	rw.handed.Store(false)
}

// TryLock locks rw for writing if it is free, and reports whether it did.
func (rw *RWMutex) TryLock() bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.writer || rw.readers > 0 || !rw.wq.empty() {
		return false
	}
	rw.writer = true
	return true
}

// Unlock unlocks rw for writing. The readers that queued while it was
// held get the lock next, or else the next waiting writer. It panics if rw
// is not locked for writing, or if its write lock has been handed to a
// waiting writer that has not taken it yet (an Unlock more than a Lock;
// one that comes after that writer has woken unlocks its lock, as with
// sync.RWMutex).
func (rw *RWMutex) Unlock() {
	rw.mu.Lock()
	if !rw.writer || rw.handed.Load() {
		rw.mu.Unlock()
		panic("scheduler: Unlock of unlocked RWMutex")
	}
	rw.writer = false
	var readers, writer *waiter
	if !rw.rq.empty() {
		readers = rw.rq.takeAll()
		for w := readers; w != nil; w = w.next {
			rw.readers++
		}
	} else if writer = rw.wq.popFront(); writer != nil {
		rw.writer = true
		rw.handed.Store(true)
	}
	rw.mu.Unlock()
	wakeChain(readers)
	if writer != nil {
		writer.wake()
	}
}

// RLocker returns a sync.Locker whose Lock and Unlock call RLock and
// RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*rlocker)(rw) }

type rlocker RWMutex

func (r *rlocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }

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

// A Cond is a condition variable, like sync.Cond, whose Wait parks a
// calling virtual thread instead of blocking its carrier. L may be a
// *Mutex, an *RWMutex, RWMutex.RLocker() or any other sync.Locker (a
// sync.Mutex too, though a virtual thread that waits to lock that blocks
// its carrier). A Cond must not be copied after first use: go vet
// reports copies, and Wait, Signal and Broadcast of a copy made after
// first use panic, as sync.Cond's do.
type Cond struct {
	// L is held while the condition is observed or changed.
	L sync.Locker

	mu sync.Mutex
	q  waitList
	// self is the Cond's address, stored by its first use: a copy made
	// after that has its original's, and panics (sync.Cond's
	// copyChecker). A pointer, not a uintptr: a Cond that stayed on a
	// stack would move with it; storing it makes every used Cond escape
	// to the heap anyway.
	self atomic.Pointer[Cond]
}

// NewCond returns a Cond that uses l.
func NewCond(l sync.Locker) *Cond { return &Cond{L: l} }

// Wait unlocks c.L, waits until Signal or Broadcast wakes it, and locks
// c.L again before returning. The caller must hold c.L. No Signal made
// after Wait has unlocked c.L is lost. As with sync.Cond, the caller
// should re-check its condition in a loop.
func (c *Cond) Wait() {
	c.checkCopy()
	if c.L == nil {
		panic("scheduler: Cond.Wait with a nil L (make a Cond with NewCond, or set L first)")
	}
	w := newWaiter()
	c.mu.Lock()
	c.q.pushBack(w)
	c.mu.Unlock()
	c.unlockL(w)
	w.wait()
	c.L.Lock()
}

// unlockL unlocks c.L for Wait, whose waiter w is queued. If that panics
// (c.L was not locked), w leaves the queue as the panic goes on, so that
// no Signal is spent on a Wait that never waited: one that already was
// goes to the next waiter. (A function of its own, so that Wait's frame,
// which a parked virtual thread keeps, has no defer.)
func (c *Cond) unlockL(w *waiter) {
	unlocked := false
	defer func() {
		if unlocked {
			return
		}
		c.mu.Lock()
		queued := c.q.remove(w)
		c.mu.Unlock()
		if !queued {
			c.Signal()
		}
	}()
	c.L.Unlock()
	unlocked = true
}

// checkCopy panics if c is a copy of a Cond made after first use, and
// records c's address at its first use.
func (c *Cond) checkCopy() {
	if p := c.self.Load(); p != c && !(p == nil && c.self.CompareAndSwap(nil, c)) && c.self.Load() != c {
		panic("scheduler: Cond is copied (a Cond must not be copied after first use: share a *Cond)")
	}
}

// Signal wakes the longest waiting Wait, if there is one. The caller may
// but need not hold c.L.
func (c *Cond) Signal() {
	c.checkCopy()
	c.mu.Lock()
	w := c.q.popFront()
	c.mu.Unlock()
	if w != nil {
		w.wake()
	}
}

// Broadcast wakes every waiting Wait.
func (c *Cond) Broadcast() {
	c.checkCopy()
	c.mu.Lock()
	ws := c.q.takeAll()
	c.mu.Unlock()
	wakeChain(ws)
}

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
