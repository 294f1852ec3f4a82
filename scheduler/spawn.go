package scheduler

import (
	"bytes"
	"context"
	"runtime"

	"github.com/weftrt/weft"
)

// Go starts fn in a new virtual thread. fn gets the virtual thread's
// context. It is cancelled when the scheduler shuts down without
// draining, or when a Group it belongs to fails. A draining Shutdown
// cancels it too, once every virtual thread has ended. It is not
// cancelled when fn returns. Join returns the error fn returns. Go
// returns ErrClosed once Shutdown or Close has begun. The virtual thread
// starts with the caller's pprof labels. Like a goroutine, it keeps the
// labels it sets across its parks.
//
// Like every method of Scheduler, Go panics on a nil *Scheduler (as New
// returns with an error). It panics on a zero Scheduler too: make
// schedulers with New.
func (s *Scheduler) Go(fn func(ctx context.Context) error) (*VThread, error) {
	if s == nil || s.ctx == nil {
		unusable(s, "Scheduler.Go on")
	}
	return s.start("", nil, fn)
}

// GoNamed is Go with a name, which Name and String return. The name is
// not a pprof label: set labels with pprof.Do in fn, or around the call.
func (s *Scheduler) GoNamed(name string, fn func(ctx context.Context) error) (*VThread, error) {
	if s == nil || s.ctx == nil {
		unusable(s, "Scheduler.GoNamed on")
	}
	return s.start(name, nil, fn)
}

// start starts fn in a new virtual thread, a child of g if g is not nil.
// Its context derives from g's, or else from s's.
func (s *Scheduler) start(name string, g *Group, fn func(ctx context.Context) error) (*VThread, error) {
	return s.startFrom(name, g, fn, false)
}

// startFrom is start. With whileClosing it starts fn even once Shutdown
// or Close has begun, unless the scheduler has drained. That is for a
// deterministic AfterFunc's f: real mode runs f in a goroutine then too,
// and a draining scheduler waits for it. Only the deterministic carrier
// that fires the timer calls it so, while still looking for work. That
// carrier runs the new thread. A timer due when the last thread ends
// while closing fires at the carrier's next look, after the drain. Its f
// is dropped then, as a pending timer's is. A thread started then would
// stay parked for good if it parked: the carrier saw the scheduler
// drained. The check and the count are one step under the detState's
// lock. checkDrained counts and closes allDone under that lock in
// deterministic mode.
func (s *Scheduler) startFrom(name string, g *Group, fn func(ctx context.Context) error, whileClosing bool) (*VThread, error) {
	if fn == nil {
		panic("scheduler.Go: nil function")
	}
	c := s.runningCarrier()
	sh := s.shard(c)
	if whileClosing {
		d := s.det
		d.mu.Lock()
		if s.drained() {
			d.mu.Unlock()
			return nil, ErrClosed
		}
		sh.started.Add(1)
		d.mu.Unlock()
	} else {
		// Counted live before the check. Shutdown sets closing before
		// it counts, so it either waits for this one or is seen.
		sh.started.Add(1)
		if s.closing.Load() {
			s.ended(sh)
			return nil, ErrClosed
		}
	}
	// Every pointer goes in the literal. While the collector marks, the
	// stores into the new, zeroed object share one write barrier call.
	// It records only the new pointers: there are no old ones to shade.
	// A store after it records both, one call each.
	vt := &VThread{s: s, id: s.newID(c), group: g, fn: fn, cont: s.newCont(c)}
	if name != "" {
		vt.rareLocked().name = name
	}
	if l := profLabel(); l != nil {
		vt.rareLocked().labels = l // the caller's, as a go statement's
	}
	if r := s.reg; r != nil {
		r.add(vt)
	}
	// vt.state is vtQueued, the zero value.
	switch {
	case c != nil: // readyOn, without its call
		c.pushOwn(vt)
	case s.outsideKick != nil:
		s.readyOutside(vt) // a Join that follows may run it (outside.go)
	default:
		s.readyGlobal(vt)
	}
	return vt, nil
}

// newCont returns a continuation record for a new virtual thread. It
// resets one that an ended virtual thread left on c, or makes a new one.
// c is the calling carrier, nil if none of s's is. The slot in
// carrier.free keeps the record it takes. So finish puts it back with no
// store if it ends on c.
func (s *Scheduler) newCont(c *carrier) *weft.Cont {
	if c != nil && len(c.free) > 0 {
		cont := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		cont.Reset(vthreadScope, vthreadBody)
		return cont
	}
	if s.opts.contStats {
		// Labels are the carrier's business (carrier.run), as with an
		// uncounted record.
		cont := weft.NewCont(vthreadScope, vthreadBody)
		cont.LeaveLabels()
		return cont
	}
	return weft.NewUncountedCont(vthreadScope, vthreadBody)
}

// maxFree is how many continuation records of ended virtual threads a
// carrier keeps for the next ones started on it.
const maxFree = 64

// vthreadBody is the body of every virtual thread's continuation. It
// finds its virtual thread with Current, runs fn and records how it
// ended. Its deferred call, bodyEnded, recovers a panic, so none reaches
// a carrier. It is one function for all, so it needs no closure. Starting
// a virtual thread allocates only its VThread, and a continuation record
// when no ended one can be reused.
//
// The deferred call is a plain function and the outcome a field. A
// deferred closure or method value, or a local whose address is taken,
// would be a stack object in the body's frame. A region holding stack
// objects cannot take weft's capture fast path. The body is in the
// region of a virtual thread's first parks. From the second park on, as
// a rule, the thaw policy leaves it frozen under the return barrier until
// the function returns. It is one frame, not a closure calling a method:
// every parked virtual thread has each such frame frozen.
func vthreadBody() {
	defer bodyEnded()
	vt := bodyVThread()
	fn := vt.fn
	vt.fn = nil
	bodyReturned(fn(&vt.ctx))
}

// bodyVThread returns the virtual thread whose body vthreadBody is: the
// owner of the innermost continuation. In vthreadBody's frame, after its
// function returned or unwound, that is always the virtual thread's own.
// Nested continuations have unmounted by then: their deferred calls are
// deeper. Current must also check the scope; this need not. bodyEnded
// does the same inline.
func bodyVThread() *VThread {
	return weft.Innermost().Owner().(*VThread)
}

// bodyReturned records the error a virtual thread's function returned.
// It finds the virtual thread again, so vthreadBody keeps no vt across
// the call. That frame is frozen at the bottom of every parked virtual
// thread's stack: a word less there counts.
//
//go:noinline
func bodyReturned(err error) {
	vt := bodyVThread()
	if err != nil { // vt.err is nil until now: no write barrier for nil
		vt.err = err
	}
	vt.returned = true
}

// bodyEnded is vthreadBody's deferred call. From a thread's second park
// on, the thaw policy leaves vthreadBody's frame frozen. A panic then
// reaches bodyEnded through the engine's return barrier, raised again
// there. The stack where it was first raised is the engine's to give
// (weft.Cont.PanicStack).
func bodyEnded() {
	c := weft.Innermost()
	vt := c.Owner().(*VThread)
	if vt.returned {
		return
	}
	if r := recover(); r != nil {
		buf := c.PanicStack(r)
		if buf == nil {
			buf = make([]byte, 64<<10)
			buf = bytes.Clone(buf[:runtime.Stack(buf, false)]) // not 64 KB kept per PanicError
		}
		vt.err = &PanicError{Value: r, Stack: buf}
		if h := vt.s.opts.OnPanic; h != nil {
			h(vt, r)
		}
		return
	}
	vt.err = ErrGoexit // runtime.Goexit: it goes on unwinding the carrier
}

// idBatch is how many IDs a carrier takes at a time for the virtual
// threads started on it. The runtime hands goroutine IDs to its Ps so.
const idBatch = 64

// newID returns a new virtual thread's ID. It takes it from c's batch if
// c is one of s's ordinary carriers. IDs are unique, but not in the
// order the threads started. Deterministic mode numbers them in order.
func (s *Scheduler) newID(c *carrier) uint64 {
	if c == nil || c.temp || s.det != nil {
		return s.ids.Add(1)
	}
	if c.idNext == c.idEnd {
		c.idEnd = s.ids.Add(idBatch) + 1
		c.idNext = c.idEnd - idBatch
	}
	id := c.idNext
	c.idNext++
	return id
}

// finish records the end of vt, run on its carrier c. The virtual
// threads joining vt go on c's run queue, as if vt had woken them
// itself. So a joining parent runs next, and a spawning tree stays depth
// first. c is nil where the carrier cannot take them (Goexit).
func (s *Scheduler) finish(vt *VThread, c *carrier) {
	if g := vt.group; g != nil {
		g.childEnded(vt)
	}
	if vt.node != nil { // each pointer cleared only if set: no write barrier
		vt.node = nil // a handle kept after the end keeps no channel node
	}
	if cont := vt.cont; cont.IsDone() {
		// Nothing else refers to the record. Keep it for the next
		// virtual thread started on c, or drop it on a Goexit (c nil).
		// A reused record keeps its arrays when it ends. A handle kept
		// after the end would keep them too. IsDone also holds for a
		// record abandoned while suspended and still unwinding, which
		// Reset refuses. The scheduler never abandons one.
		vt.cont = nil
		if c != nil && len(c.free) < maxFree {
			c.keep(cont)
		}
	}
	vt.state.Store(vtDone)
	if r := s.reg; r != nil {
		r.remove(vt)
	}
	// Counted out right after its state says done, before its joiners
	// and its Done channel are told. So Live does not count it after a
	// Join or Wait returned, or after Done closed. A Join that sees the
	// state done just before the count drops may still see it counted.
	// Counted out after the state: when the last one out while closing
	// lets the carriers exit, every virtual thread's state says done.
	// This carrier finishes this call first, and Shutdown waits for it.
	s.ended(s.shard(c))
	vt.joinMu.Lock()
	vt.ended = true
	joiner := vt.joiner
	if joiner != nil {
		vt.joiner = nil
	}
	var joinq *waiter
	if r := vt.rare.Load(); r != nil {
		if r.done != nil {
			close(r.done)
		}
		joinq, r.joinq = r.joinq, nil
	}
	vt.joinMu.Unlock()
	if joiner != nil {
		if c != nil {
			joiner.unparkOn(c)
		} else {
			joiner.Unpark()
		}
	}
	for w := joinq; w != nil; {
		next := w.next
		w.next = nil
		if c != nil && w.vt != nil {
			if w.state.CompareAndSwap(waiting, woken) {
				w.vt.unparkOn(c)
			}
		} else {
			w.wake()
		}
		w = next
	}
	if h := testHooks.finish.Load(); h != nil {
		(*h)(vt)
	}
}

// keep adds cont, the record of a virtual thread that ended on c, to
// c's free records, which have room for it. If the slot past their end
// already holds cont, Go took it from there, and only the length grows.
func (c *carrier) keep(cont *weft.Cont) {
	if n := len(c.free); n < cap(c.free) && c.free[:n+1][n] == cont {
		c.free = c.free[:n+1]
		return
	}
	c.free = append(c.free, cont)
}
