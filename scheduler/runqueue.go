package scheduler

import "github.com/weftrt/weft"

// enqueue queues vt, which its caller has just moved from parked to
// queued. It queues vt on c. With c nil, it queues vt on the carrier
// running the caller if vt's scheduler runs it. Else it queues as
// readyOn does without a carrier.
func (vt *VThread) enqueue(c *carrier) {
	if profiling.Load() != 0 {
		vt.s.profWake(vt) // profiling.go
	}
	if c == nil {
		// runningCarrier, with Current written out. Innermost and
		// currentIn inline. So a wake-up by a virtual thread, as in
		// every Chan hand-off, finds its carrier without Current's call.
		if k := weft.Innermost(); k != nil {
			if cur := currentIn(k); cur != nil && cur.s == vt.s {
				c = cur.carrier
			}
		}
	} else if c.s != vt.s {
		c = nil // a carrier of another scheduler: vt's own must run it
	}
	if c == nil {
		vt.s.readyGlobal(vt) // readyOn without a carrier
		return
	}
	// pushOwn's usual case, an empty runnext, without pushOwn's call.
	if c.runnextOK && c.queued.Load() == queuedNone {
		c.putRunnext(vt)
		return
	}
	c.pushOwn(vt)
}

// pushOwn queues vt on c. It is called on c's goroutine, by the virtual
// thread c runs or by c itself. c runs vt when it next takes work. So
// the first one queued on an empty queue wakes no other carrier at once.
// The thread that made it runnable is likely to park or end soon: a
// hand-off, or a spawn that is joined. The carrier owes that wake-up.
// The monitor pays it if c has not taken work within a tick. A virtual
// thread queued behind another wakes an idle carrier at once.
//
// With nothing queued, vt goes into runnext without the lock
// (putRunnext).
func (c *carrier) pushOwn(vt *VThread) {
	s := c.s
	if !c.runnextOK {
		c.push(vt)
		if !c.temp { // nobody else takes a compensation carrier's
			s.wakeOne()
		}
		return
	}
	if c.queued.Load() != queuedNone {
		c.mu.Lock()
		if r := c.queued.Load(); r != queuedNone {
			if r != queuedInQueue {
				c.moveRunnext()
			}
			c.queue = append(c.queue, vt)
			c.mu.Unlock()
			s.wakeOne() // behind another: at once
			return
		}
		c.mu.Unlock() // a thief took what there was
	}
	c.putRunnext(vt)
}

// putRunnext puts vt in c's runnext, on c's goroutine, without the lock.
// runnext is empty: queued is queuedNone. The store of vt's ID comes
// before the load of nidle. A carrier going idle raises nidle before it
// looks at every queued. So either the look sees vt or this sees the
// carrier idle. With no carrier idle, one that goes idle later looks at
// every queue before it sleeps.
func (c *carrier) putRunnext(vt *VThread) {
	c.runnext = vt
	c.queued.Store(vt.id)
	if c.s.nidle.Load() != 0 {
		c.oweWake()
	}
}

// oweWake records that c owes a wake-up for the thread it has just put
// in runnext while a carrier is idle (pushOwn). It does nothing if c owes
// one already. It kicks the monitor if it is parked. The monitor pays
// the wake-up if c has not taken work within a tick.
func (c *carrier) oweWake() {
	s := c.s
	if c.owed.Load() == 0 {
		c.owed.Store(s.tick.Load())
		if s.monitorParked.Load() {
			select {
			case s.monitorKick <- struct{}{}:
			default:
			}
		}
	}
}

// payOwed wakes an idle carrier now if c owes one: c is about to block.
func (c *carrier) payOwed() {
	if c.owed.Load() != 0 && c.owed.Swap(0) != 0 {
		c.s.wakeOne()
	}
}

// push queues vt on c, behind what is queued there, waking nobody. It
// must run on c's goroutine. moveRunnext moves runnext with a plain store
// of queued. Only c's goroutine may do that, since pop and unqueue take
// runnext without the lock. pushOwn is its one caller outside tests. It
// calls push only in deterministic mode, which returns before the lock,
// or on a compensation carrier.
func (c *carrier) push(vt *VThread) {
	if d := c.s.det; d != nil {
		d.push(vt)
		return
	}
	// A compensation carrier queues on its own queue too, newest first.
	// So a spawn tree it runs stays depth first. Nobody steals from it.
	// It spills its queue to the global queue before it blocks pinned or
	// retires (spill).
	c.mu.Lock()
	if r := c.queued.Load(); r != queuedInQueue && r != queuedNone {
		c.moveRunnext()
	}
	c.queue = append(c.queue, vt)
	c.queued.Store(queuedInQueue)
	c.mu.Unlock()
}

// spill moves what is queued on c, a compensation carrier, to the global
// queue, oldest first. It wakes a carrier for each. Nobody steals from
// c, so c's goroutine calls it before it blocks pinned or retires. It
// moves under both locks, c.mu then s.mu. Nothing takes them the other
// way round.
func (c *carrier) spill() {
	s := c.s
	c.mu.Lock()
	n := len(c.queue) - c.head
	if n > 0 {
		s.mu.Lock()
		for i := c.head; i < len(c.queue); i++ {
			s.appendGlobal(c.queue[i])
			c.queue[i] = nil
		}
		s.mu.Unlock()
		c.queue, c.head = c.queue[:0], 0
		c.queued.Store(queuedNone)
	}
	c.mu.Unlock()
	for range n {
		s.wakeOne()
	}
}

// moveRunnext moves the thread in runnext to the end of queue, which is
// empty. c's goroutine holds c.mu. queued holds the thread's ID: only c
// takes it without the lock, and c is here. A look under the lock
// (hasWork, a thief) sees it in one place or the other.
func (c *carrier) moveRunnext() {
	c.queue = append(c.queue, c.runnext)
	c.runnext = nil
	c.queued.Store(queuedInQueue)
}

// unqueue takes vt off c's queue if it is among the last few queued
// there. It reports whether it did: vt is then the caller's to run.
// Called on c's goroutine.
func (c *carrier) unqueue(vt *VThread) bool {
	if r := c.queued.Load(); r != queuedInQueue {
		// Nothing in queue: vt is queued on c only in runnext. If a
		// thief has taken it since the load, the swap fails.
		if r != vt.id || !c.queued.CompareAndSwap(r, queuedNone) {
			return false
		}
		c.runnext = nil
		if c.owed.Load() != 0 {
			c.owed.Store(0) // nothing queued is left to wake a carrier for
		}
		return true
	}
	c.mu.Lock()
	for i, stop := len(c.queue)-1, max(c.head, len(c.queue)-maxUnqueueScan); i >= stop; i-- {
		if c.queue[i] == vt {
			last := len(c.queue) - 1
			// The newest moves into vt's place; the newer ones do not
			// shift down. A parent joins its children oldest first, and
			// each shifted pointer is a write with the collector's
			// barrier. So thieves and fair picks, which take the head,
			// take the newest first: the one its parent joins last. The
			// carrier's pop takes the tail: the one that was next to vt.
			// No thread gets more threads beneath it.
			if i < last {
				c.queue[i] = c.queue[last]
			}
			c.queue[last] = nil
			c.queue = c.queue[:last]
			c.compact()
			if len(c.queue) == c.head {
				c.queued.Store(queuedNone)
				if c.owed.Load() != 0 {
					// Nothing queued is left to wake a carrier for.
					c.owed.Store(0)
				}
			}
			c.mu.Unlock()
			return true
		}
	}
	c.mu.Unlock()
	return false
}

// maxUnqueueScan is how far from its tail unqueue looks for a virtual
// thread. A parent joins the children it queued last. A long queue is
// not searched.
const maxUnqueueScan = 16

// pop takes the newest virtual thread of c's queue. Called on c's
// goroutine.
func (c *carrier) pop() *VThread {
	r := c.queued.Load()
	if vt := c.takeRunnextIf(r); vt != nil {
		return vt
	}
	return c.popQueue(r)
}

// isID reports whether r, a value of queued, is a thread's ID: not queuedNone,
// queuedInQueue or queuedTaking.
func isID(r uint64) bool { return r-1 < queuedTaking-1 }

// takeRunnextIf takes the thread in runnext if r is its ID and no thief
// has taken it since. Else it returns nil. r is a value of queued that
// c's goroutine loaded. It is how c's goroutine takes runnext without the
// lock: pop, next and loop call it.
func (c *carrier) takeRunnextIf(r uint64) *VThread {
	if isID(r) && c.queued.CompareAndSwap(r, queuedNone) {
		return c.takeRunnext()
	}
	return nil
}

// takeRunnext returns the thread in runnext, which c's goroutine has just
// taken by moving queued from its ID to queuedNone, and clears runnext.
func (c *carrier) takeRunnext() *VThread {
	vt := c.runnext
	c.runnext = nil
	return vt
}

// popQueue is the rest of pop, given queued as pop loaded it. It takes
// nothing if that was queuedNone: only c queues on c. Else it takes the
// newest of queue, under the lock. A thread's ID there means that a
// thief took it or is taking it; the lock waits for it.
func (c *carrier) popQueue(r uint64) *VThread {
	if r == queuedNone {
		return nil
	}
	c.mu.Lock()
	if len(c.queue) == c.head {
		c.mu.Unlock()
		return nil
	}
	last := len(c.queue) - 1
	vt := c.queue[last]
	c.queue[last] = nil
	c.queue = c.queue[:last]
	c.compact()
	if len(c.queue) == c.head {
		c.queued.Store(queuedNone)
	}
	c.mu.Unlock()
	return vt
}

// The values of carrier.queued other than the ID of the thread in
// runnext. IDs start at 1 and never come near the others.
const (
	queuedNone    = 0
	queuedInQueue = ^uint64(0)
	queuedTaking  = ^uint64(0) - 1
)

func (c *carrier) compact() {
	if c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	} else if c.head > 64 && c.head*2 > len(c.queue) {
		n := copy(c.queue, c.queue[c.head:])
		clear(c.queue[n:])
		c.queue, c.head = c.queue[:n], 0
	}
}

// next finds a runnable virtual thread. It looks at its own queue,
// newest first, then the global queue, then the other carriers'. Once in
// fairPicks picks it takes the oldest of the global queue or of its own
// instead (fairPick, fairness.go).
//
// loop takes the thread in runnext itself, without this call, on every
// pick but the fair one, and counts the pick.
func (c *carrier) next() *VThread {
	s := c.s
	if d := s.det; d != nil {
		d.fireContexts()
		d.fireDue()
		return d.pop()
	}
	if c.picks++; c.picks == fairPicks {
		c.picks = 0
		if vt := c.fairPick(); vt != nil {
			return vt
		}
	}
	// pop, without its call: takeRunnextIf inlines.
	r := c.queued.Load()
	if vt := c.takeRunnextIf(r); vt != nil {
		return vt
	}
	if vt := c.popQueue(r); vt != nil {
		return vt
	}
	if vt := s.popGlobal(); vt != nil {
		return vt
	}
	// Every other carrier, from the next one round. A compensation
	// carrier is not among them, so it looks at all of them.
	n := len(s.carriers)
	for i := 1; i <= n; i++ {
		if o := s.carriers[(c.id+i)%n]; o != c {
			if vt := o.steal(); vt != nil {
				return vt
			}
		}
	}
	return nil
}

// steal takes the virtual thread at the head of c's queue: the oldest,
// unless an unqueue moved a newer one there; or runnext's. Other
// carriers call it, and c's own fair pick (fairPick).
func (c *carrier) steal() *VThread {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch r := c.queued.Load(); r {
		case queuedNone:
			return nil
		case queuedInQueue:
			vt := c.queue[c.head]
			c.queue[c.head] = nil
			c.head++
			c.compact()
			if len(c.queue) == c.head {
				c.queued.Store(queuedNone)
			}
			return vt
		default:
			// An ID. c may take it meanwhile, and queue another.
			if c.queued.CompareAndSwap(r, queuedTaking) {
				vt := c.runnext
				c.runnext = nil
				c.queued.Store(queuedNone)
				return vt
			}
		}
	}
}

// runningCarrier returns the carrier of s running the calling virtual
// thread, or nil if the caller is not one of s's virtual threads.
func (s *Scheduler) runningCarrier() *carrier {
	if cur := Current(); cur != nil && cur.s == s {
		return cur.carrier
	}
	return nil
}

// readyOn makes vt runnable and wakes an idle carrier. It queues vt on
// c's queue, where c is the carrier of s running the caller
// (runningCarrier), else on the global queue. In deterministic mode,
// pushOwn queues as readyGlobal does.
func (s *Scheduler) readyOn(vt *VThread, c *carrier) {
	if c != nil {
		c.pushOwn(vt)
		return
	}
	s.readyGlobal(vt)
}

// readyGlobal is readyOn without a carrier: vt goes on the global queue,
// or the deterministic one.
func (s *Scheduler) readyGlobal(vt *VThread) {
	if d := s.det; d != nil {
		d.push(vt)
		s.wakeOne()
		return
	}
	s.mu.Lock()
	s.appendGlobal(vt)
	s.mu.Unlock()
	s.wakeOne()
}

// readyBack queues a virtual thread that yielded behind everything else.
// It is readyGlobal, but in deterministic mode it wakes nobody: the one
// carrier is the yielder's, and runs on.
func (s *Scheduler) readyBack(vt *VThread) {
	if d := s.det; d != nil {
		d.push(vt)
		return
	}
	s.readyGlobal(vt)
}

// appendGlobal queues vt on the global queue; s.mu is held.
func (s *Scheduler) appendGlobal(vt *VThread) {
	s.global = append(s.global, vt)
	s.nglobal.Store(int32(len(s.global) - s.ghead))
}

// maxKeptGlobal is the largest array the global queue keeps once empty.
// A burst of starts from outside, 100,000 threads at once, does not hold
// its array for good. The usual trickle reuses one without allocating:
// timers, the poller, a goroutine's Go.
const maxKeptGlobal = 1024

// hasGlobal reports whether the global queue holds a virtual thread,
// without the lock. A carrier about to sleep raises nidle before it
// looks. A push stores nglobal before it loads nidle (wakeOne). So
// either the look sees the push or the push wakes a carrier.
func (s *Scheduler) hasGlobal() bool {
	return s.nglobal.Load() > 0
}

// popGlobal takes the oldest virtual thread of the global queue, if any.
// It takes s.mu only if the queue looks non-empty. Every carrier that
// finds its own queue empty comes here, and would otherwise contend for
// s.mu.
func (s *Scheduler) popGlobal() *VThread {
	if s.nglobal.Load() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ghead == len(s.global) {
		return nil
	}
	vt := s.global[s.ghead]
	s.global[s.ghead] = nil
	s.ghead++
	switch {
	case s.ghead == len(s.global): // empty: start again at the front
		if cap(s.global) > maxKeptGlobal {
			s.global = nil
		} else {
			s.global = s.global[:0]
		}
		s.ghead = 0
	case s.ghead > 64 && 2*s.ghead > len(s.global):
		// Never empty, as under a steady stream. Move the queue down, so
		// append does not grow the array with its dead front. Move it
		// into a smaller array if a burst made this one large.
		live := s.global[s.ghead:]
		if cap(s.global) > maxKeptGlobal && 4*len(live) < cap(s.global) {
			s.global = append(make([]*VThread, 0, 2*len(live)), live...)
		} else {
			n := copy(s.global, live)
			clear(s.global[n:])
			s.global = s.global[:n]
		}
		s.ghead = 0
	}
	s.nglobal.Store(int32(len(s.global) - s.ghead))
	return vt
}
