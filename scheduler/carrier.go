package scheduler

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/netpoll"
)

// A carrier is a goroutine that runs virtual threads, one at a time. It
// keeps a local run queue: it pushes and pops at the tail (the virtual
// threads it made runnable last run first, which keeps a spawning tree
// depth first and a woken partner hot), and other carriers steal from the
// head. (A Join that takes a thread from the middle, unqueue, moves the
// tail into its place, so the order is mostly, not strictly, that.)
//
// A virtual thread that the carrier queues when nothing else is queued on
// it goes into runnext instead, a slot it fills and empties without the
// lock, as the Go runtime's Ps have: a spawn that is joined, or the
// partner woken by a hand-off, goes in and out of it without the lock.
// The slot holds a thread only while the queue is empty (the carrier
// moves that thread to the queue, under the lock, before it queues
// another), so it is the whole queue, and the order is the queue's. Its
// state, rn, says what is queued, and is the one thing read without the
// lock; the thread's ID in it says which thread runnext holds, so that
// taking it is one compare-and-swap of a word, without the runtime call
// and write barrier of an atomic pointer's.
type carrier struct {
	s    *Scheduler
	id   int
	cpu  int
	temp bool // a compensation carrier: exits once fewer carriers are blocked pinned than these run
	// runnextOK says that pushOwn may put a thread in runnext: c is not
	// a compensation carrier, and its scheduler is not deterministic
	// (whose run queue is detState's). Set when c is made.
	runnextOK bool

	mu    sync.Mutex
	queue []*VThread
	head  int
	// rn says what is queued on c: rnNone, nothing; rnQueue, something in
	// queue, and nothing in runnext; another value, the thread of that ID
	// in runnext, and nothing in queue; rnTaking, runnext's thread being
	// taken by a thief, which holds mu. Only c's goroutine moves it from
	// rnNone (only c queues on c); it moves to rnQueue and from it only
	// under mu; and from an ID to rnNone by c's goroutine (taking the
	// thread, without mu) or to rnTaking by a thief (under mu), by a
	// compare-and-swap, which the ID makes safe (IDs are never reused),
	// or to rnQueue by c's goroutine under mu (moveRunnext). Under mu it
	// is never rnTaking, and says what queue holds.
	rn atomic.Uint64
	// runnext is the thread whose ID rn holds, nil otherwise. Whoever
	// moves rn from that ID owns it, to read and clear: c's goroutine,
	// which alone writes it otherwise (in rnNone, before it stores the
	// ID; under mu when it moves the thread to queue), or a thief until
	// it stores rnNone.
	runnext *VThread

	wake chan struct{}
	// pinned is where a virtual thread blocked pinned on this carrier
	// (parkPinned) waits for its Unpark: one at a time, as the carrier runs
	// one, so the channel is the carrier's and not in every VThread.
	pinned chan struct{}

	// cur is the virtual thread this carrier is running, so that the
	// carrier can finish it if it ends the carrier's goroutine (Goexit).
	cur *VThread
	// nested is how many virtual threads runNested is running inside
	// other virtual threads' Joins on this carrier, one inside the other.
	nested int
	// owed is nonzero while the carrier owes a wake-up for a virtual
	// thread it queued on its empty queue (pushOwn): the monitor's tick
	// when it began. The carrier clears it when it next takes work from
	// its queues, or when a Join takes the last one queued back
	// (unqueue); the monitor pays it (wakes an idle carrier) if it lasts
	// a whole tick.
	owed atomic.Uint64

	// free are continuation records of virtual threads that ended on this
	// carrier, which Go reuses when called from a virtual thread running
	// on it; only the carrier's goroutine touches them. Past its length,
	// the array keeps the records Go took last, each in the slot it was
	// taken from (keep): while the collector marks, every pointer store
	// runs its write barrier, and a virtual thread started and joined on
	// one carrier takes its record from the slot that it puts it back
	// into, with no store either way. A record kept so is never read
	// from there; it is in use, or on a free list, or was dropped (by a
	// Goexit, finish having no carrier, or where it ended, its carrier's
	// free records being full) and waits for its slot's next store: at
	// most cap(free), maxFree, records per carrier.
	free []*weft.Cont
	// picks counts the carrier's picks (next's calls, and loop's takes
	// from runnext without one) since its last fair one, for next's
	// fairness rule; only the carrier's goroutine touches it.
	picks uint32

	// count is this carrier's shard of the live count (Scheduler.shard
	// says which threads it counts); idNext and idEnd, its batch of IDs
	// (newID). Only what the carrier runs writes them, and only Live and
	// liveCount read the count elsewhere: they are kept off the cache
	// lines of mu and the queue, which other carriers write when they
	// steal.
	_      cpu.CacheLinePad
	count  liveShard
	idNext uint64
	idEnd  uint64
	_      cpu.CacheLinePad
}

// newCarrier returns carrier id of s, not yet started, bound to no CPU; a
// temp one is a compensation carrier.
func newCarrier(s *Scheduler, id int, temp bool) *carrier {
	return &carrier{s: s, id: id, temp: temp, runnextOK: !temp && s.det == nil, cpu: -1, wake: make(chan struct{}, 1), pinned: make(chan struct{}, 1)}
}

func (c *carrier) loop() {
	s := c.s
	// The carrier's own profiler labels are the scheduler's, which run
	// puts back after each virtual thread (labels.go). Not those the go
	// statement gave this goroutine: a compensation carrier is started
	// by a virtual thread blocked pinned (parkPinned), a replacement by a
	// carrier whose thread called runtime.Goexit, with that thread's.
	if profLabel() != s.labels {
		setProfLabel(s.labels)
	}
	normal := false
	defer func() {
		if !normal {
			// A virtual thread called runtime.Goexit, which ends the
			// goroutine running it: it is done, and this carrier is
			// replaced.
			if vt := c.cur; vt != nil {
				c.cur = nil
				vt.carrier = nil
				s.finish(vt, nil)
			}
			// The replacement starts with this goroutine's labels,
			// which are vt's (or its joiner's): the carrier's first.
			setProfLabel(s.labels)
			s.wg.Add(1)
			go c.loop()
		}
		s.wg.Done()
	}()
	if s.lock {
		runtime.LockOSThread()
		var restore func() bool
		if c.cpu >= 0 { // New allows CPUs only with locked carriers
			restore = setAffinity(c.cpu)
		} else if c.temp && len(s.opts.CPUs) > 0 {
			// A compensation carrier stands in for one blocked on its
			// CPU, which it cannot take (that thread still holds it,
			// blocked): it runs on any of the scheduler's CPUs, never
			// outside them.
			restore = setAffinity(s.opts.CPUs...)
		}
		defer func() {
			// A thread bound to a CPU goes back to the runtime's pool,
			// which runs other goroutines on it, as it was before; if
			// that fails, it ends with this goroutine instead.
			if restore == nil || restore() {
				runtime.UnlockOSThread()
			}
		}()
	}
	for {
		if c.owed.Load() != 0 {
			c.owed.Store(0) // this carrier takes what it queued
		}
		// next's first choice, the thread in runnext (a hand-off's
		// partner, a joined spawn), taken without next's call: as next
		// takes it, unless this pick is next's fair one. rn is never a
		// thread's ID in deterministic mode or on a compensation
		// carrier (pushOwn queues elsewhere there), so neither needs
		// a test here.
		var vt *VThread
		if r := c.rn.Load(); isID(r) && c.picks < fairPicks-1 && c.rn.CompareAndSwap(r, rnNone) {
			c.picks++
			vt = c.takeRunnext()
		} else {
			vt = c.next()
		}
		if vt == nil {
			if c.temp && s.retireTemp() {
				normal = true
				return
			}
			if s.drained() {
				if s.det != nil {
					s.det.exit()
				}
				normal = true
				return
			}
			if s.det != nil && s.det.advance() {
				continue
			}
			if s.det == nil && netpoll.Poll() {
				continue
			}
			c.sleep()
			continue
		}
		c.run(vt)
		if c.temp {
			if s.retireTemp() {
				// The block it stood in for has ended: a busy
				// compensation carrier leaves too, or carriers beyond
				// Options.Carriers would run for as long as work keeps
				// coming. What it queued is in the global queue, and
				// woke a carrier.
				normal = true
				return
			}
		}
	}
}

// run mounts vt until it parks, yields or finishes.
func (c *carrier) run(vt *VThread) {
	s := c.s
	vt.state.Store(vtRunning)
	vt.carrier = c
	prev := c.cur // the joiner, in runNested
	c.cur = vt
	// vt's profiler labels in the goroutine's place while it runs
	// (labels.go): outer are the carrier's, or the joiner's in runNested.
	outer, own := profLabel(), vt.labels()
	if own != outer {
		setProfLabel(own)
	}
	vt.cont.Run(vt)
	if now := profLabel(); now != own || now != outer {
		if now != own && !vt.cont.IsDone() { // a finished thread needs none
			vt.keepLabels(now)
		}
		if now != outer {
			setProfLabel(outer)
		}
	}
	c.cur = prev
	vt.carrier = nil
	if vt.cont.IsDone() {
		s.finish(vt, c)
		return
	}
	switch vt.action {
	case actYield:
		vt.state.Store(vtQueued)
		s.readyBack(vt)
	default: // actPark
		vt.state.Store(vtParked)
		if vt.permit.Load() && vt.state.CompareAndSwap(vtParked, vtQueued) {
			// As any push by c: behind another queued virtual thread, it
			// must wake a carrier, or that one, whose wake-up c owes,
			// waits behind it unowed.
			c.pushOwn(vt)
		}
	}
}

// pushOwn queues vt on c, called on c's goroutine (by the virtual thread
// it runs, or by c itself): c runs it when it next takes work, so the
// first one queued on an empty queue wakes no other carrier at once, as
// the one that made it runnable is likely to park or end soon (a
// hand-off, or a spawn that is joined); the carrier owes that wake-up,
// and the monitor pays it if c has not taken work within a tick. A
// virtual thread queued behind another wakes an idle carrier at once.
//
// With nothing queued, vt goes into runnext without the lock: rn stays
// rnNone until c's store of vt's ID. That store comes before the load of
// nidle, and a carrier going idle raises nidle before it looks at every
// rn: either the look sees vt or the push sees the carrier idle.
// enqueue has that case written out.
func (c *carrier) pushOwn(vt *VThread) {
	s := c.s
	if !c.runnextOK {
		c.push(vt)
		s.wakeOne()
		return
	}
	if c.rn.Load() != rnNone {
		c.mu.Lock()
		if r := c.rn.Load(); r != rnNone {
			if r != rnQueue {
				c.moveRunnext()
			}
			c.queue = append(c.queue, vt)
			c.mu.Unlock()
			s.wakeOne() // behind another: at once
			return
		}
		c.mu.Unlock() // a thief took what there was
	}
	c.runnext = vt
	c.rn.Store(vt.id)
	if s.nidle.Load() != 0 {
		c.oweWake()
	}
	// Else no carrier is idle: a carrier that goes idle looks at every
	// queue before it sleeps.
}

// oweWake records that c owes a wake-up for the thread it has just put
// in runnext, while a carrier is idle (pushOwn), unless it owes one
// already, and kicks the monitor if it is parked, so that it pays the
// wake-up if c has not taken work within a tick.
func (c *carrier) oweWake() {
	s := c.s
	if c.owed.Load() == 0 {
		c.owed.Store(s.tick.Load())
		if s.monParked.Load() {
			select {
			case s.monKick <- struct{}{}:
			default:
			}
		}
	}
}

// demote moves the newest virtual thread of c's queue to the global queue,
// if it has another beneath, for next's fairness rule; called on c's
// goroutine. It wakes nobody, and need not: the thread was queued behind
// another, which woke an idle carrier then if there was one, and a
// carrier that goes idle later finds it in the global queue as it would
// have in c's. It moves under both locks (c.mu, then s.mu; nothing takes
// them the other way round), so that it is always in one queue or the
// other, and sleep looks at the global queue after the carriers'.
func (c *carrier) demote() {
	s := c.s
	c.mu.Lock()
	if len(c.queue)-c.head >= 2 {
		vt := c.queue[len(c.queue)-1]
		c.queue[len(c.queue)-1] = nil
		c.queue = c.queue[:len(c.queue)-1]
		s.mu.Lock()
		s.appendGlobal(vt)
		s.mu.Unlock()
	}
	c.mu.Unlock()
}

// payOwed wakes an idle carrier now if c owes one: c is about to block.
func (c *carrier) payOwed() {
	if c.owed.Load() != 0 && c.owed.Swap(0) != 0 {
		c.s.wakeOne()
	}
}

// push queues vt on c, behind what is queued there, waking nobody; called
// on c's goroutine, as pushOwn (its one caller outside tests, and only in
// deterministic mode or on a compensation carrier, which return before
// the lock): moveRunnext moves runnext with a plain store of rn, which
// only c's goroutine may do while pop and unqueue take it without the
// lock.
func (c *carrier) push(vt *VThread) {
	if d := c.s.det; d != nil {
		d.push(vt)
		return
	}
	if c.temp {
		// Nobody steals from a compensation carrier, and it may block
		// pinned at any time: what it makes runnable goes where every
		// carrier looks.
		c.s.mu.Lock()
		c.s.appendGlobal(vt)
		c.s.mu.Unlock()
		return
	}
	c.mu.Lock()
	if r := c.rn.Load(); r != rnQueue && r != rnNone {
		c.moveRunnext()
	}
	c.queue = append(c.queue, vt)
	c.rn.Store(rnQueue)
	c.mu.Unlock()
}

// moveRunnext moves the thread in runnext to the end of queue, which is
// empty; c.mu is held, by c's goroutine, and rn holds the thread's ID
// (only c takes it without the lock, and c is here). A look under the
// lock (hasWork, a thief) sees it in one place or the other.
func (c *carrier) moveRunnext() {
	c.queue = append(c.queue, c.runnext)
	c.runnext = nil
	c.rn.Store(rnQueue)
}

// unqueue takes vt off c's queue if it is among the last few queued there,
// and reports whether it did: vt is then the caller's to run. Called on
// c's goroutine.
func (c *carrier) unqueue(vt *VThread) bool {
	if r := c.rn.Load(); r != rnQueue {
		// Nothing in queue: vt is queued on c only in runnext. If a
		// thief has taken it since the load, the swap fails.
		if r != vt.id || !c.rn.CompareAndSwap(r, rnNone) {
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
			// The newest moves into vt's place. A parent that joins its
			// children in the order it started them takes the oldest of
			// them first; shifting the newer ones down cost a pointer
			// write each, with the collector's write barrier while it
			// marks (skynet: 4% of its CPU time on 16 CPUs). The order
			// of the rest changes: thieves, which take the head, now
			// take the newest first (the one its parent joins last),
			// and the carrier's own pop and demote, which take the
			// tail, the one that was next to it.
			if i < last {
				c.queue[i] = c.queue[last]
			}
			c.queue[last] = nil
			c.queue = c.queue[:last]
			c.compact()
			if len(c.queue) == c.head {
				c.rn.Store(rnNone)
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

// keep adds cont, the record of a virtual thread that ended on c, to c's
// free records, which have room for it. If the slot past their end
// already holds cont (Go took it from there), only the length grows.
func (c *carrier) keep(cont *weft.Cont) {
	if n := len(c.free); n < cap(c.free) && c.free[:n+1][n] == cont {
		c.free = c.free[:n+1]
		return
	}
	c.free = append(c.free, cont)
}

// maxUnqueueScan is how far from its tail unqueue looks for a virtual
// thread: a parent joins the children it queued last, and a long queue is
// not searched.
const maxUnqueueScan = 16

// maxNested is how many virtual threads runNested runs one inside the other
// on a carrier: each holds its frames and its joiner's on the carrier's
// stack, where a deep chain of joins would otherwise grow it without
// bound (parked, each joiner would take a few hundred bytes of heap).
const maxNested = 64

// runNested runs vt, which the calling virtual thread cur is about to join,
// here, inside cur's continuation, if vt is waiting in the queue of cur's
// carrier among the last queued there, and so would have run on it soon:
// this saves parking cur and thawing it again once vt has finished, as
// fork/join pools run a task's queued subtask in its join. vt runs until
// it finishes or parks (then cur parks for it as usual). It reports
// whether it ran vt.
//
// vt runs on cur's goroutine, above cur's frames, as a continuation
// nested in cur's: a runtime.Goexit in vt, which ends the goroutine,
// ends cur too (both with ErrGoexit), and the carrier is replaced. Join
// calls it only when cur's continuation is the innermost one mounted
// (currentTop): vt nested inside a continuation that cur's body mounted
// could yield to that one's scope. It runs nothing nested in
// deterministic mode, where every virtual thread runs from the run
// queue, nor on the portable backend, where vt's continuation would be a
// coroutine made by cur's goroutine and so bound to cur's thread locking.
//
// A panic that escapes vt's body (only Options.OnPanic can raise one:
// the body recovers vt's own) unwinds into cur, as a Goexit does, and
// becomes cur's panic, where at the top of a carrier it would crash the
// program.
func runNested(cur, vt *VThread) bool {
	c := cur.carrier
	if c == nil || c.s != vt.s || !c.s.nest || c.nested >= maxNested ||
		vt.state.Load() != vtQueued || !c.unqueue(vt) {
		return false
	}
	c.nested++
	// cur's profiler labels, which run puts back after vt; if vt ends
	// the run by a Goexit or a panic, run does not, and this does, so
	// that cur's deferred calls (and a recover there) have cur's own.
	outer := profLabel()
	normal := false
	defer func() {
		c.nested--
		if !normal {
			// vt called runtime.Goexit, which goes on unwinding cur:
			// the carrier's loop finishes cur, vt is finished here.
			// (Or OnPanic panicked, which unwinds into cur.)
			setProfLabel(outer)
			c.cur = cur
			vt.carrier = nil
			c.s.finish(vt, nil)
		}
	}()
	c.run(vt)
	normal = true
	return true
}

// pop takes the newest virtual thread of c's queue; called on c's
// goroutine. next has it written out: a thread in runnext (the partner
// of a hand-off, a spawn that is joined) is then taken without a call.
func (c *carrier) pop() *VThread {
	r := c.rn.Load()
	if isID(r) && c.rn.CompareAndSwap(r, rnNone) {
		return c.takeRunnext()
	}
	return c.popQueue(r)
}

// isID reports whether r, a value of rn, is a thread's ID: not rnNone,
// rnQueue or rnTaking.
func isID(r uint64) bool { return r-1 < rnTaking-1 }

// takeRunnext returns the thread in runnext, which c's goroutine has just
// taken by moving rn from its ID to rnNone, and clears runnext.
func (c *carrier) takeRunnext() *VThread {
	vt := c.runnext
	c.runnext = nil
	return vt
}

// popQueue is the rest of pop, given rn as pop loaded it: nothing if it
// was rnNone (only c queues on c), else the newest of queue, under the
// lock; a thread's ID there means that a thief took it or is taking it
// (the lock waits for it).
func (c *carrier) popQueue(r uint64) *VThread {
	if r == rnNone {
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
		c.rn.Store(rnNone)
	}
	c.mu.Unlock()
	return vt
}

// steal takes the virtual thread at the head of c's queue: the oldest,
// unless an unqueue moved a newer one there; or runnext's.
func (c *carrier) steal() *VThread {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch r := c.rn.Load(); r {
		case rnNone:
			return nil
		case rnQueue:
			vt := c.queue[c.head]
			c.queue[c.head] = nil
			c.head++
			c.compact()
			if len(c.queue) == c.head {
				c.rn.Store(rnNone)
			}
			return vt
		default:
			// An ID. c may take it meanwhile, and queue another.
			if c.rn.CompareAndSwap(r, rnTaking) {
				vt := c.runnext
				c.runnext = nil
				c.rn.Store(rnNone)
				return vt
			}
		}
	}
}

// rn's values other than the ID of the thread in runnext; IDs start at 1
// and never come near the others.
const (
	rnNone   = 0
	rnQueue  = ^uint64(0)
	rnTaking = ^uint64(0) - 1
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

// fairPicks is how often next is fair: once in this many picks, as the Go
// scheduler looks at its global queue.
const fairPicks = 61

// next finds a runnable virtual thread: its own queue, newest first, the
// global queue, then the other carriers'.
//
// Once in fairPicks picks it is fair. A carrier whose own queue never
// empties (two virtual threads that hand work to each other refill it at
// every pick) would otherwise never reach the global queue, where virtual
// threads that yielded, that a timer or the poller woke, or that were
// started or unparked from a plain goroutine wait; nor the older ones
// beneath the pair in its own queue. So it takes the oldest of the global
// queue first; or, if there is none, it moves the newest of its own queue
// (the pair's) to the global queue, as the Go scheduler moves a goroutine
// that ran a whole time slice there, and goes on with the next newest.
// Taking the oldest of its own queue instead would start a new branch of
// a spawn tree far from the one running, and a tree walked that way
// without nesting (the portable backend) keeps thousands of virtual
// threads live instead of a few dozen.
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
		if vt := s.popGlobal(); vt != nil {
			return vt
		}
		c.demote()
	}
	// pop, written out.
	r := c.rn.Load()
	if isID(r) && c.rn.CompareAndSwap(r, rnNone) {
		return c.takeRunnext()
	}
	if vt := c.popQueue(r); vt != nil {
		return vt
	}
	if vt := s.popGlobal(); vt != nil {
		return vt
	}
	// Every other carrier, from the next one round; a compensation
	// carrier, which is not among them, looks at all of them.
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

// sleep waits until some carrier is told there is work.
//
// wakeOne skips the scheduler's lock while no carrier is idle (nidle is
// 0), so a carrier announces itself idle first and only then looks at the
// queues once more: a push that the look misses comes after it under the
// queue's lock, or, into an empty runnext, after it in the order of atomic
// operations, so it sees nidle raised and wakes a carrier (or owes the
// wake-up, with nothing else queued: pushOwn). It
// looks at the global queue last: a carrier's demote moves a virtual
// thread from its own queue there, waking nobody, so a look at the
// global queue before the carriers' could miss it in both.
func (c *carrier) sleep() {
	s := c.s
	if h := sleepHooks.beforeIdle.Load(); h != nil {
		(*h)(c)
	}
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.nidle.Add(1)
	s.mu.Unlock()
	if h := sleepHooks.beforeLook.Load(); h != nil {
		(*h)(c)
	}
	// A compensation carrier also looks at whether it is one too many
	// now: a pinned park that ended after its retireTemp said no and
	// before it was on the idle list found it nowhere to wake
	// (wakeSurplusTemp lowers blocked before it looks at the list).
	if s.drained() || c.hasWork() || s.hasGlobal() || (c.temp && s.surplusTemp()) {
		s.mu.Lock()
		for i, o := range s.idle {
			if o == c { // still idle: nobody is waking it
				s.idle = append(s.idle[:i], s.idle[i+1:]...)
				s.nidle.Add(-1)
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		// A wakeOne took it off the list and sends to c.wake: take that.
	}
	<-c.wake
}

// sleepHooks are called, if set, by sleep before it registers the carrier
// as idle and before it looks at the queues: tests hold a carrier there to
// make an interleaving happen. Only tests set them.
var sleepHooks struct {
	beforeIdle, beforeLook atomic.Pointer[func(*carrier)]
}

func (c *carrier) hasWork() bool {
	// In deterministic mode the run queue is the detState's: a virtual
	// thread pushed there after next() came up empty (by a Go or an
	// Unpark from outside the carrier) must keep the carrier awake, or
	// its wakeOne, which found no idle carrier yet, is lost.
	if d := c.s.det; d != nil {
		d.mu.Lock()
		n := len(d.ready)
		for _, t := range d.timers {
			if !t.stopped {
				n++ // a timer to advance to
				break
			}
		}
		// A context that ended after fireContexts looked: its
		// AfterFunc's wakeOne found no idle carrier, so this look is
		// all that keeps the carrier from sleeping through it.
		for _, w := range d.watches {
			if !w.done && w.ctx.Err() != nil {
				n++
				break
			}
		}
		d.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	for _, o := range c.s.carriers {
		// rn under the lock: it then says what queue holds, and a
		// thread that moves from runnext to queue (moveRunnext) or
		// from queue to the global queue (demote) moves under it.
		o.mu.Lock()
		r := o.rn.Load()
		o.mu.Unlock()
		if r != rnNone {
			return true
		}
	}
	return false
}

// runningCarrier returns the carrier of s running the calling virtual
// thread, or nil if the caller is not one of s's virtual threads.
func (s *Scheduler) runningCarrier() *carrier {
	if cur := Current(); cur != nil && cur.s == s {
		return cur.carrier
	}
	return nil
}

// readyOn makes vt runnable: on c's queue, where c is the carrier of s
// running the caller (runningCarrier), else on the global queue; and
// wakes an idle carrier. (pushOwn, in deterministic mode, queues as
// readyGlobal does.)
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
func (s *Scheduler) readyBack(vt *VThread) {
	if d := s.det; d != nil {
		d.push(vt)
		return
	}
	s.mu.Lock()
	s.appendGlobal(vt)
	s.mu.Unlock()
	s.wakeOne()
}

// appendGlobal queues vt on the global queue; s.mu is held.
func (s *Scheduler) appendGlobal(vt *VThread) {
	s.global = append(s.global, vt)
	s.nglobal.Store(int32(len(s.global) - s.ghead))
}

// maxKeptGlobal is the largest array the global queue keeps once empty: a
// burst of starts from outside (100,000 threads at once) does not hold its
// array for good, and the usual trickle (timers, the poller, a goroutine's
// Go) reuses one without allocating.
const maxKeptGlobal = 1024

// hasGlobal reports whether the global queue holds a virtual thread,
// without the lock: a carrier about to sleep raises nidle before it looks,
// and a push stores nglobal before it loads nidle (wakeOne), so either the
// look sees the push or the push wakes a carrier.
func (s *Scheduler) hasGlobal() bool {
	return s.nglobal.Load() > 0
}

// popGlobal takes the oldest virtual thread of the global queue, if any.
// It takes s.mu only if the queue looks non-empty: every carrier that
// finds its own queue empty comes here, and would otherwise contend for
// it.
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
		// Never empty, as under a steady stream: move the queue down
		// rather than let append grow the array with its dead front;
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

func (s *Scheduler) wakeOne() {
	if s.nidle.Load() == 0 {
		return
	}
	s.mu.Lock()
	var c *carrier
	if n := len(s.idle); n > 0 {
		c = s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.nidle.Add(-1)
	}
	s.mu.Unlock()
	if c != nil {
		c.wake <- struct{}{}
	}
}

func (s *Scheduler) wakeAll() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.nidle.Store(0)
	s.mu.Unlock()
	for _, c := range idle {
		c.wake <- struct{}{}
	}
}

// startTemp starts a compensation carrier.
func (s *Scheduler) startTemp() {
	s.mu.Lock()
	if s.temp >= s.opts.MaxCompensation || s.temp >= int(s.blocked.Load()) {
		// Options.MaxCompensation run already, or one for every carrier
		// blocked pinned (a surplus one retires only when it next looks
		// for work, after the thread it runs parks or ends).
		s.mu.Unlock()
		return
	}
	s.temp++
	c := newCarrier(s, len(s.carriers), true)
	s.mu.Unlock()
	s.wg.Add(1)
	go c.loop()
}

// surplusTemp reports whether more compensation carriers run than
// carriers are blocked pinned.
func (s *Scheduler) surplusTemp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.blocked.Load()) < s.temp
}

// wakeSurplusTemp wakes an idle compensation carrier, if more run than
// carriers are blocked pinned, so that it looks again and retires: one
// that went idle while the blocks lasted would otherwise sleep on.
func (s *Scheduler) wakeSurplusTemp() {
	s.mu.Lock() // a pinned park's slow path
	var w *carrier
	if s.temp > int(s.blocked.Load()) {
		for i := len(s.idle) - 1; i >= 0; i-- {
			if c := s.idle[i]; c.temp {
				w = c
				s.idle = append(s.idle[:i], s.idle[i+1:]...)
				s.nidle.Add(-1)
				break
			}
		}
	}
	s.mu.Unlock()
	if w != nil {
		w.wake <- struct{}{}
	}
}

// retireTemp reports whether a compensation carrier that looks for work
// (after running a thread, or finding none) should exit, because fewer
// carriers are blocked pinned than compensation carriers run, and if so
// counts it out, in one step so that two cannot both leave.
func (s *Scheduler) retireTemp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(s.blocked.Load()) < s.temp {
		s.temp--
		return true
	}
	return false
}
