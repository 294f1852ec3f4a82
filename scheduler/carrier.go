package scheduler

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/netpoll"
)

// A carrier is a goroutine that runs virtual threads, one at a time.
//
// It pushes and pops at the tail of its local queue: what it made
// runnable last runs first. That keeps a spawn tree depth first and a
// woken partner hot. Other carriers steal from the head. A Join that
// takes a thread from the middle (unqueue) moves the tail into its
// place. So the order is mostly, not strictly, that.
//
// runnext is a slot for the one thread queued when nothing else is: a
// spawn that is joined, or the partner woken by a hand-off. The carrier
// fills and empties it without the lock, as the Go runtime's Ps do. It
// holds a thread only while queue is empty. The carrier moves that
// thread to queue, under the lock, before it queues another. So the slot
// is the whole queue, and the order is the queue's. queued holds the
// slot's thread's ID. Taking it is one compare-and-swap of a word,
// without the runtime call and write barrier of an atomic pointer.
type carrier struct {
	s    *Scheduler
	id   int
	cpu  int
	temp bool // a compensation carrier: exits once fewer carriers are blocked pinned than these run
	// runnextOK says that pushOwn may put a thread in runnext. c is not
	// a compensation carrier, and its scheduler is not deterministic: a
	// deterministic run queue is detState's. Set when c is made.
	runnextOK bool

	mu    sync.Mutex
	queue []*VThread
	head  int
	// queued says what is queued on c. It is the one thing read
	// without mu:
	//   - queuedNone: nothing;
	//   - queuedInQueue: something in queue, nothing in runnext;
	//   - a thread's ID: that thread in runnext, nothing in queue;
	//   - queuedTaking: a thief, which holds mu, takes runnext's thread.
	// Only c's goroutine moves it from queuedNone: only c queues on c.
	// It moves to and from queuedInQueue only under mu. It moves from an
	// ID by a compare-and-swap, safe because IDs are never reused. From
	// an ID it moves to one of:
	//   - queuedNone, by c's goroutine without mu;
	//   - queuedTaking, by a thief under mu;
	//   - queuedInQueue, by c's goroutine under mu (moveRunnext).
	// Under mu it is never queuedTaking.
	queued atomic.Uint64
	// runnext is the thread whose ID queued holds, nil otherwise. Whoever
	// moves queued from that ID owns it, to read and clear: c's goroutine,
	// or a thief until it stores queuedNone. Otherwise only c's goroutine
	// writes it: in queuedNone, before it stores the ID, and under mu
	// when it moves the thread to queue.
	runnext *VThread

	wake chan struct{}
	// pinned is where a virtual thread blocked pinned on this carrier
	// (parkPinned) waits for its Unpark. The carrier runs one at a time,
	// so the channel is the carrier's, not in every VThread.
	pinned chan struct{}

	// cur is the virtual thread this carrier is running. The carrier
	// finishes it if it ends the carrier's goroutine (Goexit).
	cur *VThread
	// switches counts the virtual threads the carrier has mounted (run).
	// The monitor finds the carrier held when it stays the same
	// (held.go). Only the carrier's goroutine writes it.
	switches atomic.Uint32
	// compensated is nonzero while the thread the carrier runs blocks it
	// and a compensation carrier was started for it (Blocking, a pinned
	// park). The monitor does not count it held then.
	compensated atomic.Int32
	// gid is the ID of the carrier's goroutine, which held.go finds in
	// a traceback. tid is its OS thread's if it is locked to it, else 0.
	gid atomic.Uint64
	tid atomic.Int32
	// borrowed is set while a plain goroutine's Join runs a thread as
	// this carrier (runOutside). gid and tid are then not the running
	// goroutine's: the monitor finds it by its runOutside frame.
	borrowed atomic.Bool
	// watch is the monitor's view of the carrier. Only the monitor
	// touches it.
	watch watch
	// nested is how many virtual threads runNested is running inside
	// other virtual threads' Joins on this carrier, one inside the other.
	nested int
	// owed is nonzero while the carrier owes a wake-up for a virtual
	// thread it queued on its empty queue (pushOwn). It holds the
	// monitor's tick when the debt began. The carrier clears it when it
	// next takes work from its queues, or when a Join takes the last one
	// queued back (unqueue). If it lasts a whole tick, the monitor pays
	// it by waking an idle carrier.
	owed atomic.Uint64

	// free are continuation records of virtual threads that ended on this
	// carrier. Go reuses them when called from a virtual thread running
	// on it. Only the carrier's goroutine touches them. Past its length,
	// the array keeps the records Go took last, each in the slot it was
	// taken from (keep). While the collector marks, every pointer store
	// runs its write barrier. A virtual thread started and joined on one
	// carrier takes its record from the slot it puts it back into: no
	// store either way. A record kept so is never read from there. It is
	// in use, or on a free list, or was dropped, and waits for its
	// slot's next store. It is dropped by a Goexit, where finish has no
	// carrier, or where its carrier's free records are full. That keeps
	// at most cap(free), maxFree, records per carrier.
	free []*weft.Cont
	// picks counts the carrier's picks since its last fair one, for
	// next's fairness rule: next's calls, and loop's takes from runnext
	// without one. Only the carrier's goroutine touches it.
	picks uint32
	// fairOwn says that the last fair pick tried c's own queue first.
	// fairEnded is ends at the last fair pick. fairPassed is how many
	// own turns in a row passed over the oldest (fairPick). Only the
	// carrier's goroutine touches them.
	fairOwn    bool
	fairPassed uint32
	fairEnded  uint32
	// ends counts the virtual threads that ended in run on c, for the
	// fair pick. Only the carrier's goroutine touches it.
	ends uint32

	// count is this carrier's shard of the live count; Scheduler.shard
	// says which threads it counts. idNext and idEnd are its batch of IDs
	// (newID). Only what the carrier runs writes them. Only Live and
	// liveCount read the count elsewhere. They are kept off the cache
	// lines of mu and the queue, which other carriers write when they
	// steal.
	_      cpu.CacheLinePad
	count  liveShard
	idNext uint64
	idEnd  uint64
	_      cpu.CacheLinePad
}

// newCarrier returns carrier id of s, not yet started, bound to no CPU.
// A temp one is a compensation carrier.
func newCarrier(s *Scheduler, id int, temp bool) *carrier {
	return &carrier{s: s, id: id, temp: temp, runnextOK: !temp && s.det == nil, cpu: -1, wake: make(chan struct{}, 1), pinned: make(chan struct{}, 1)}
}

func (c *carrier) loop() {
	s := c.s
	// The carrier's own profiler labels are the scheduler's. run puts
	// them back after each virtual thread (labels.go). They are not
	// those the go statement gave this goroutine. A virtual thread
	// blocked pinned (parkPinned) starts a compensation carrier with its
	// labels. A carrier whose thread called runtime.Goexit starts a
	// replacement with that thread's.
	if profLabel() != s.labels {
		setProfLabel(s.labels)
	}
	c.gid.Store(goroutineID())
	normal := false
	defer func() {
		if !normal {
			// A virtual thread called runtime.Goexit, which ends the
			// goroutine running it. The thread is done, and this
			// carrier is replaced.
			if vt := c.cur; vt != nil {
				c.cur = nil
				vt.carrier = nil
				s.finish(vt, nil)
			}
			// The replacement starts with this goroutine's labels,
			// which are vt's or its joiner's. So set the carrier's first.
			setProfLabel(s.labels)
			s.wg.Add(1)
			go c.loop()
		}
		s.wg.Done()
	}()
	if s.lock {
		runtime.LockOSThread()
		c.tid.Store(int32(threadID()))
		var restore func() bool
		if c.cpu >= 0 { // New allows CPUs only with locked carriers
			restore = setAffinity(c.cpu)
		} else if c.temp && len(s.opts.CPUs) > 0 {
			// A compensation carrier stands in for one blocked on its
			// CPU. It cannot take that CPU: the blocked thread still
			// holds it. It runs on any of the scheduler's CPUs, never
			// outside them.
			restore = setAffinity(s.opts.CPUs...)
		}
		defer func() {
			// A thread bound to a CPU goes back to the runtime's pool
			// with its former affinity, to run other goroutines. If
			// restoring fails, it ends with this goroutine instead.
			if restore == nil || restore() {
				runtime.UnlockOSThread()
			}
		}()
	}
	for {
		if c.owed.Load() != 0 {
			c.owed.Store(0) // this carrier takes what it queued
		}
		// next's first choice is the thread in runnext: a hand-off's
		// partner, a joined spawn. It is taken here without next's call,
		// unless this pick is next's fair one. queued is never a
		// thread's ID in deterministic mode or on a compensation
		// carrier: pushOwn queues elsewhere there. So neither needs a
		// test here.
		var vt *VThread
		if c.picks < fairPicks-1 {
			vt = c.takeRunnextIf(c.queued.Load())
		}
		if vt != nil {
			c.picks++ // as next counts its picks
		} else {
			vt = c.next()
		}
		if vt == nil {
			if c.temp && s.retireTemp() {
				normal = true // its queue is empty: next found nothing
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
				// The block it stood in for has ended, so a busy
				// compensation carrier leaves too. Else carriers beyond
				// Options.Carriers would run as long as work keeps
				// coming. What it queued goes to the global queue.
				c.spill()
				normal = true
				return
			}
		}
	}
}

// run mounts vt until it parks, yields or finishes.
func (c *carrier) run(vt *VThread) {
	s := c.s
	c.switches.Add(1) // for the monitor's look for held carriers
	vt.state.Store(vtRunning)
	vt.carrier = c
	prev := c.cur // the joiner, in runNested
	c.cur = vt
	// vt's profiler labels take the goroutine's place while it runs
	// (labels.go). outer are the carrier's, or the joiner's in runNested.
	outer, own := profLabel(), vt.labels()
	set := own // what the goroutine has while vt runs
	if profiling.Load() != 0 {
		set = s.profMount(vt, c, own) // profiling.go
	}
	if set != outer {
		setProfLabel(set)
	}
	vt.cont.Run(vt)
	if now := profLabel(); now != set || now != outer {
		if now != set && !vt.cont.IsDone() { // a finished thread needs none
			vt.keepLabels(now)
		}
		if now != outer {
			setProfLabel(outer)
		}
	}
	c.cur = prev
	vt.carrier = nil
	if vt.cont.IsDone() {
		c.ends++
		s.finish(vt, c)
		return
	}
	switch vt.action {
	case actYield:
		if profiling.Load() != 0 {
			s.profYield(vt) // profiling.go
		}
		vt.state.Store(vtQueued)
		s.readyBack(vt)
	default: // actPark
		if profiling.Load() != 0 {
			s.profPark(vt) // profiling.go
		}
		vt.state.Store(vtParked)
		if vt.permit.Load() && vt.state.CompareAndSwap(vtParked, vtQueued) {
			// As any push by c: behind another queued virtual thread, it
			// must wake a carrier. Else that one, whose wake-up c owes,
			// waits behind it unowed.
			c.pushOwn(vt)
		}
	}
}

// sleep waits until some carrier is told there is work.
//
// wakeOne skips the scheduler's lock while no carrier is idle (nidle is
// 0). So a carrier announces itself idle first, and only then looks at
// the queues once more. A push that the look misses comes after it:
// under the queue's lock, or, into an empty runnext, in the order of
// atomic operations. So that push sees nidle raised and wakes a carrier.
// With nothing else queued, it owes the wake-up instead (pushOwn).
func (c *carrier) sleep() {
	s := c.s
	if h := testHooks.sleepBeforeIdle.Load(); h != nil {
		(*h)(c)
	}
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.nidle.Add(1)
	s.mu.Unlock()
	if h := testHooks.sleepBeforeLook.Load(); h != nil {
		(*h)(c)
	}
	// A compensation carrier also looks at whether it is one too many
	// now. A pinned park may have ended after its retireTemp said no and
	// before it was on the idle list. That park found it nowhere to wake:
	// wakeSurplusTemp lowers blocked before it looks at the list.
	if s.drained() || c.hasWork() || s.hasGlobal() || (c.temp && s.surplusTemp()) {
		s.mu.Lock()
		for i, o := range s.idle {
			if o == c { // still idle: nobody is waking it
				s.idle = append(s.idle[:i], s.idle[i+1:]...)
				s.nidle.Add(-1)
				s.mu.Unlock()
				s.kickIdleMonitor()
				return
			}
		}
		s.mu.Unlock()
		// A wakeOne took it off the list and sends to c.wake: take that.
	}
	<-c.wake
	s.kickIdleMonitor()
}

func (c *carrier) hasWork() bool {
	// In deterministic mode the run queue is the detState's. A Go or an
	// Unpark from outside the carrier may push a virtual thread there
	// after next() came up empty. It must keep the carrier awake. Else
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
		// A context may have ended after fireContexts looked. Its
		// AfterFunc's wakeOne found no idle carrier. So this look is all
		// that keeps the carrier from sleeping through it.
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
		// queued under the lock. It then says what queue holds. A
		// thread that moves from runnext to queue (moveRunnext) moves
		// under the lock.
		o.mu.Lock()
		r := o.queued.Load()
		o.mu.Unlock()
		if r != queuedNone {
			return true
		}
	}
	return false
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
