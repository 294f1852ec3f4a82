package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weftrt/weft"
)

// VThread is a virtual thread: a function running in a continuation. It
// parks by yielding, and whichever carrier picks it up resumes it.
type VThread struct {
	// ctx is the context fn gets. It is a field of no size, whose
	// address is the VThread's, so the context takes no word of its own.
	// Its parent is group's or s's (vtContext.parent).
	ctx  vtContext
	s    *Scheduler
	id   uint64
	cont *weft.Cont
	// group is the Group vt is a child of, or nil.
	group *Group

	carrier *carrier // the carrier running it, while it runs

	state    atomic.Int32 // vtQueued (as made), vtRunning, vtParked, vtPinned, vtDone
	permit   atomic.Bool
	action   int8 // what the last yield asked of the carrier: actPark, actYield
	returned bool // fn returned (body)
	ended    bool // finish has run; under joinMu

	fn func(context.Context) error // what Go was given, until the body starts it

	err    error
	joinMu sync.Mutex
	// joiner is the first virtual thread to wait in Join, which needs
	// nothing else. The others, and Done's channel, are in rare.
	joiner *VThread
	// rare holds what most virtual threads never need. The first user
	// makes it: GoNamed before it publishes vt, the rest under joinMu.
	// Every parked virtual thread has a VThread, so it stays small.
	rare atomic.Pointer[vthreadRare]
	// node is the node of the last blocking Send or Recv without a
	// timeout or context, a *keptNode[T]. The next one of the same T
	// reuses it (chan.go).
	node unsafe.Pointer
}

// vthreadRare is the part of a VThread that most never need.
type vthreadRare struct {
	name string
	// done is made on demand, by Done or by Join from a goroutine.
	// finish closes it and sets ended. joinq, linked through next, are
	// the virtual threads other than joiner waiting in Join or Wait.
	done  chan struct{}
	joinq *waiter
	// labels are the virtual thread's profiler labels (labels.go). Only
	// the goroutine that runs it writes and reads them, or Go before it
	// is published.
	labels unsafe.Pointer
	// track is vt's registry entry (registry.go), set before vt is
	// published when its scheduler tracks threads.
	track *tracked
	// parkedAt is when vt last parked, and wokenAt when that park was
	// woken, for the park profile (profiling.go). The carriers that run
	// vt write and read them. The waker that queues vt writes wokenAt
	// before it queues vt.
	parkedAt, wokenAt int64
}

// rareLocked returns vt's rare part, made if need be. Called with joinMu
// held, or before vt is published.
func (vt *VThread) rareLocked() *vthreadRare {
	r := vt.rare.Load()
	if r == nil {
		r = new(vthreadRare)
		vt.rare.Store(r)
	}
	return r
}

// A virtual thread's states. vtQueued is the zero value. So a new
// VThread is queued as made, with no atomic store (startFrom).
const (
	vtQueued int32 = iota
	vtRunning
	vtParked
	vtPinned
	vtDone
)

const (
	actPark int8 = iota
	actYield
)

// ID returns the virtual thread's identifier, unique within its scheduler.
// ID, Name, Context and Scheduler panic on a nil *VThread, saying so.
func (vt *VThread) ID() uint64 {
	if vt == nil {
		nilVThread("ID")
	}
	return vt.id
}

// Name returns the name given to GoNamed, or "".
func (vt *VThread) Name() string {
	if vt == nil {
		nilVThread("Name")
	}
	if r := vt.rare.Load(); r != nil {
		return r.name
	}
	return ""
}

// Scheduler returns the scheduler the virtual thread runs on.
func (vt *VThread) Scheduler() *Scheduler {
	if vt == nil {
		nilVThread("Scheduler")
	}
	return vt.s
}

// String returns "vthread ID", followed by the name in parentheses if it
// has one. For a nil *VThread it returns "vthread <nil>".
func (vt *VThread) String() string {
	if vt == nil {
		return "vthread <nil>"
	}
	if name := vt.Name(); name != "" {
		return fmt.Sprintf("vthread %d (%s)", vt.id, name)
	}
	return fmt.Sprintf("vthread %d", vt.id)
}

// Current returns the virtual thread running on the calling goroutine, or
// nil if it is not running one.
func Current() *VThread {
	if c := weft.Innermost(); c != nil {
		return currentIn(c)
	}
	return nil
}

// currentIn is Current given the innermost continuation mounted on the
// calling goroutine (weft.Innermost), not nil. It inlines, as Innermost
// does. So a caller with both inline finds a virtual thread with
// Innermost's call alone; Current would be a call more. unparkOn, on the
// path of every wake-up by a virtual thread, relies on it.
func currentIn(c *weft.Cont) (vt *VThread) {
	if c.Scope() != vthreadScope {
		return currentOuter()
	}
	vt, _ = c.Owner().(*VThread)
	return
}

// currentOuter is currentIn for code in a continuation that a virtual
// thread's body mounted, or that runs no virtual thread.
func currentOuter() *VThread {
	if c := weft.Current(vthreadScope); c != nil {
		vt, _ := c.Owner().(*VThread)
		return vt
	}
	return nil
}

// currentTop returns the calling virtual thread, or nil. It also reports
// whether the caller runs directly in that virtual thread's
// continuation, not in one its body mounted (a continuation.Pull, say).
// A virtual thread run nested in such a one could reach its yields.
func currentTop() (*VThread, bool) {
	c := weft.Innermost()
	if c == nil {
		return nil, false
	}
	if c.Scope() == vthreadScope {
		vt, _ := c.Owner().(*VThread)
		return vt, vt != nil
	}
	return Current(), false
}

// nilVThread panics for a method called on a nil *VThread. Its message
// says where such a handle usually comes from.
func nilVThread(method string) {
	panic("scheduler: VThread." + method + " on a nil *VThread (Current returns nil outside a virtual thread, and Go and GoNamed return nil with an error)")
}
