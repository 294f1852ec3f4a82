package scheduler

import (
	"sync"
	"sync/atomic"
	"time"
)

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
// Fairness: Mutex lets a locker barge. Unlock frees the lock and wakes
// the first waiter. That waiter competes for it with virtual threads and
// goroutines that are just arriving. They are running already, so the
// lock stays busy, not idle, while the woken waiter is being scheduled.
// A woken waiter that loses goes back to the front of the queue. Once a
// waiter has waited longer than 1 ms, the mutex switches to handoff
// mode. A virtual thread measures that by the scheduler's clock. In
// deterministic mode the clock stands still while virtual threads run,
// so the switch comes as soon as a woken waiter loses. In handoff mode,
// Unlock hands the lock directly to the first waiter, in FIFO order, and
// newcomers queue behind. It switches back when the queue empties, or
// when a waiter it hands the lock to had waited less than 1 ms. The
// latter never happens in deterministic mode, where waits take no time
// on its clock. So no waiter starves, and the lock goes back to barging
// once waits are short again. The common uncontended case is one
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
			// lost in deterministic mode. That clock moves only when
			// every virtual thread waits for a timer. It might never
			// move while the holder keeps relocking.
			ns |= mutexStarving
		}
		// The compare-and-swap fails if the holder unlocked in the
		// meantime. Look again; do not wait for an Unlock that has been
		// and gone.
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
			// Handed over in handoff mode. The lock is ours now, and
			// an Unlock from here on is ours to make. As in
			// sync.Mutex, a waiter that had not waited long ends the
			// mode. Else, under steady contention, every Unlock would
			// be a hand-off, a park and an unpark. Barging keeps the
			// lock busy.
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

// TryLock locks m if it is free and reports whether it did. It never
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

// Unlock unlocks m, waking a waiter if there is one. It panics if m is
// not locked. As with sync.Mutex, an Unlock more than a Lock is caught
// if m is free, or handed to a waiter that has not taken it yet (handoff
// mode). One that comes after another virtual thread or goroutine has
// taken the lock unlocks that one's lock.
func (m *Mutex) Unlock() {
	if m.state.CompareAndSwap(mutexLocked, 0) {
		return
	}
	m.unlockSlow()
}

func (m *Mutex) unlockSlow() {
	m.mu.Lock()
	// Nothing else changes the state now. The locked bit is ours, and
	// the other bits change only under m.mu.
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

func (r *rlocker) Lock() { (*RWMutex)(r).RLock() }

func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }
