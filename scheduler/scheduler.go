package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// vthreadScope delimits every virtual thread's continuation, whatever its
// scheduler: parking yields to it.
var vthreadScope = scope.New("vthread")

// Errors.
var (
	// ErrClosed: Go on a scheduler that is shutting down or shut down.
	ErrClosed = errors.New("scheduler: closed")
	// ErrGoexit: the virtual thread called runtime.Goexit.
	ErrGoexit = errors.New("scheduler: virtual thread called runtime.Goexit")
)

// PanicError is what Join returns for a virtual thread that panicked.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the virtual thread's stack where it panicked
}

// Error says that a virtual thread panicked, and with what.
func (e *PanicError) Error() string {
	return fmt.Sprintf("scheduler: virtual thread panicked: %v", e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Options configure a Scheduler. The zero value is usable.
type Options struct {
	// Carriers is the number of carrier goroutines; 0 means GOMAXPROCS.
	// A negative number is an error.
	Carriers int
	// CPUs, if not empty, binds carrier i to CPU CPUs[i%len(CPUs)] (Linux;
	// elsewhere New returns an error), for thread-per-core use: CPUs the
	// process may run on, numbered below 1024 (unix.CPUSet). It needs
	// carriers locked to their threads (LockOSThread); New returns an
	// error otherwise. A compensation carrier (MaxCompensation) is bound
	// to all of CPUs. A carrier's thread gets its affinity back when the
	// carrier exits.
	CPUs []int
	// MaxCompensation bounds the extra carriers started while virtual
	// threads are blocked pinned, one for each such thread; 0 means
	// Carriers, negative means none.
	MaxCompensation int
	// LockOSThread locks each carrier to its OS thread. The default, nil,
	// locks carriers on the stack-copying backend and not on the portable
	// one, whose continuations must be resumed under the thread locking
	// they were first run under (docs/limitations.md).
	//
	// Waking a locked carrier that sleeps hands a P to its thread, which
	// costs tens of microseconds where an unlocked carrier wakes as any
	// goroutine does: a scheduler whose virtual threads are mostly started
	// or woken by plain goroutines runs faster unlocked (false), unless it
	// binds carriers to CPUs (docs/benchmarks.md has the numbers).
	LockOSThread *bool
	// Deterministic runs one carrier that picks the next runnable virtual
	// thread with a random generator seeded by Seed, and gives Sleep and
	// timers a virtual clock that jumps to the next timer when nothing is
	// runnable. The same program with the same seed interleaves the same
	// way, as long as only virtual threads of this scheduler wake each
	// other (no plain goroutines, no I/O). There is no compensation
	// carrier: a virtual thread that parks while pinned (Pins counts it)
	// blocks the only carrier until it is unparked from outside, which in
	// a simulation is never, so a deterministic program must not block
	// inside pinning.Do, a cgo callback or a reflect call, or with its
	// thread locked. Deterministic overrides Carriers and MaxCompensation
	// (one carrier, none extra), so that one Options can be run either
	// way by setting Deterministic alone.
	Deterministic bool
	// Seed seeds the deterministic mode's choice of the next virtual
	// thread; it is unused unless Deterministic is set.
	Seed uint64
	// OnPanic, if set, is called with each virtual thread that panicked
	// and the panic value, before Join returns it. It runs in that
	// thread's last deferred call, while the panic is being recovered, so
	// it must not block or park: the thread is pinned there (a park
	// blocks its carrier, and in deterministic mode the scheduler for
	// good). A panic raised by OnPanic itself is not recovered: it ends
	// the program, as an unrecovered panic in a goroutine does (so
	// re-panicking makes virtual threads' panics fatal). For a virtual
	// thread that ran inside its joiner's Join, it unwinds into the joiner
	// first.
	OnPanic func(vt *VThread, v any)
	// Context is the parent of every virtual thread's context; nil means
	// context.Background().
	Context context.Context

	// contStats gives virtual threads' continuation records the engine's
	// counters (weft.NewCont), which tests read; a parked virtual thread
	// is 96 bytes smaller without them (weft.NewUncountedCont).
	contStats bool
}

// Scheduler runs virtual threads on carrier goroutines. Make one with
// New: every method of a zero Scheduler, or of a nil *Scheduler (as New
// returns with an error), panics, saying so.
type Scheduler struct {
	opts     Options
	ctx      context.Context
	cancel   context.CancelFunc
	lock     bool
	carriers []*carrier
	// labels are the profiler labels of the goroutine that called New,
	// every carrier's own (labels.go).
	labels unsafe.Pointer
	// nest: Join may run a queued virtual thread nested in its caller
	// (runNested): not in deterministic mode, not on the portable backend.
	nest bool
	// closing is set once Shutdown or Close begins; every start reads it.
	closing atomic.Bool

	// The fields from here to the next pad are written by every carrier
	// as it goes idle, wakes, or uses the global queue: on cache lines of
	// their own, so that the reads above, on every start, do not miss.
	_       cpu.CacheLinePad
	mu      sync.Mutex   // guards global, idle and temp
	global  []*VThread   // submitted from outside carriers, FIFO: global[ghead:]
	ghead   int          // where the queue starts in global
	nglobal atomic.Int32 // the queue's length, read without the lock by popGlobal and hasGlobal
	idle    []*carrier   // carriers waiting for work
	nidle   atomic.Int32 // len(idle), read without the lock by wakeOne
	temp    int          // running compensation carriers
	blocked atomic.Int32
	_       cpu.CacheLinePad

	// The virtual threads started and not finished are counted in
	// shards, so that carriers starting and finishing them on many CPUs
	// do not all write one cache line (on 16 CPUs, the one shared
	// counter and ID took a third of skynet's time): each ordinary
	// carrier's, for what the virtual threads it runs start and what ends
	// on it, and outside, for the rest (starts from plain goroutines,
	// starts and ends on compensation carriers, ends after a Goexit).
	// liveCount and Live add them up. outside and ids, written by starts
	// from outside the carriers, have a cache line of their own too.
	outside liveShard
	ids     atomic.Uint64 // the last ID handed out, singly or in a carrier's batch
	_       cpu.CacheLinePad
	allDone chan struct{} // closed when closing and the live count reaches 0
	doneOne sync.Once
	wg      sync.WaitGroup // carriers and the monitor

	// The monitor (monitor.go) pays the wake-ups that carriers owe.
	tick      atomic.Uint64 // the monitor's tick count, from 1
	monParked atomic.Bool   // the monitor waits for monKick
	monKick   chan struct{} // buffered 1

	pinMu sync.Mutex
	pins  map[PinSite]uint64

	det *detState
}

// New starts a scheduler's carriers.
func New(opts Options) (*Scheduler, error) {
	if opts.Carriers < 0 {
		return nil, fmt.Errorf("scheduler: Carriers is %d: give a positive number, or 0 for GOMAXPROCS", opts.Carriers)
	}
	if opts.Carriers == 0 {
		opts.Carriers = runtime.GOMAXPROCS(0)
	}
	if opts.Deterministic {
		opts.Carriers = 1
		opts.MaxCompensation = -1
	}
	if opts.MaxCompensation == 0 {
		opts.MaxCompensation = opts.Carriers
	}
	if len(opts.CPUs) > 0 {
		opts.CPUs = slices.Clone(opts.CPUs) // the caller's to change after
		if err := checkAffinity(opts.CPUs); err != nil {
			return nil, err
		}
	}
	parent := opts.Context
	if parent == nil {
		parent = context.Background()
	}
	s := &Scheduler{opts: opts, allDone: make(chan struct{}), pins: make(map[PinSite]uint64), monKick: make(chan struct{}, 1)}
	s.tick.Store(1)
	s.labels = profLabel()
	s.ctx, s.cancel = context.WithCancel(parent)
	s.lock = weft.ActiveBackend() == weft.StackCopying
	if opts.LockOSThread != nil {
		s.lock = *opts.LockOSThread
	}
	if s.lock && weft.ActiveBackend() != weft.StackCopying && (opts.Carriers > 1 || opts.MaxCompensation >= 0) {
		// A portable continuation must be resumed under the thread locking
		// it was first run under; virtual threads move between carriers.
		s.cancel()
		return nil, errors.New("scheduler: on the portable backend, carriers locked to OS threads need Carriers: 1 and MaxCompensation: -1 (" + weft.Backend() + ")")
	}
	if len(opts.CPUs) > 0 && !s.lock {
		// Binding an unlocked carrier would bind whichever thread it
		// happened to be on, for other goroutines, and not the carrier.
		s.cancel()
		return nil, errors.New("scheduler: CPUs needs carriers locked to their OS threads (LockOSThread)")
	}
	s.nest = !opts.Deterministic && weft.ActiveBackend() == weft.StackCopying
	if opts.Deterministic {
		s.det = &detState{rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	}
	for i := range opts.Carriers {
		c := newCarrier(s, i, false)
		if len(opts.CPUs) > 0 {
			c.cpu = opts.CPUs[i%len(opts.CPUs)]
		}
		s.carriers = append(s.carriers, c)
	}
	for _, c := range s.carriers {
		s.wg.Add(1)
		go c.loop()
	}
	if s.det == nil {
		s.wg.Add(1)
		go s.monitor()
	}
	return s, nil
}

// VThread is a virtual thread: a function running in a continuation that
// parks by yielding and is resumed by whichever carrier picks it up.
type VThread struct {
	// ctx is the context fn gets: a field of no size, whose address is
	// the VThread's, so that the context costs no word of its own (its
	// parent is group's or s's, vtContext.parent).
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
	// nothing else; the others, and Done's channel, are in rare.
	joiner *VThread
	// rare holds what most virtual threads never need, made by the first
	// that does: GoNamed before it publishes vt, the rest under joinMu.
	// Every parked virtual thread has a VThread, so it stays small.
	rare atomic.Pointer[vtRare]
	// node is the node of the last blocking Send or Recv without a
	// timeout or context, a *keptNode[T], which the next one of the same
	// T reuses (chan.go).
	node unsafe.Pointer
}

// vtRare is the part of a VThread that most never need.
type vtRare struct {
	name string
	// done is made on demand (Done, or Join from a goroutine) and closed
	// by finish, which sets ended. joinq, linked through next, are the
	// virtual threads other than joiner waiting in Join or Wait.
	done  chan struct{}
	joinq *waiter
	// labels are the virtual thread's profiler labels (labels.go),
	// written and read only by the goroutine that runs it, or by Go
	// before it is published.
	labels unsafe.Pointer
}

// rareLocked returns vt's rare part, made if need be; called with joinMu
// held, or before vt is published.
func (vt *VThread) rareLocked() *vtRare {
	r := vt.rare.Load()
	if r == nil {
		r = new(vtRare)
		vt.rare.Store(r)
	}
	return r
}

// A virtual thread's states. vtQueued is the zero value: a new VThread
// is queued as made, with no atomic store (startFrom).
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

// Go starts fn in a new virtual thread. fn gets the virtual thread's
// context, which is cancelled when the scheduler shuts down without
// draining (a draining Shutdown cancels it too, once every virtual thread
// has ended) or when a Group it belongs to fails; it is not cancelled when
// fn returns. The error fn returns is what Join returns. Go returns
// ErrClosed once Shutdown or Close has begun. The virtual thread starts
// with the caller's pprof labels and keeps the labels it sets across its
// parks, as a goroutine would.
//
// Go panics on a nil *Scheduler (as New returns with an error) and on a
// zero Scheduler (make schedulers with New), as every method of
// Scheduler does.
func (s *Scheduler) Go(fn func(ctx context.Context) error) (*VThread, error) {
	if s == nil || s.ctx == nil {
		unusable(s, "Scheduler.Go on")
	}
	return s.start("", nil, fn)
}

// GoNamed is Go with a name, which Name and String return. (The name is
// not a pprof label: set labels with pprof.Do in fn, or around the call.)
func (s *Scheduler) GoNamed(name string, fn func(ctx context.Context) error) (*VThread, error) {
	if s == nil || s.ctx == nil {
		unusable(s, "Scheduler.GoNamed on")
	}
	return s.start(name, nil, fn)
}

// check panics, for the method op, if s is nil or a zero Scheduler: one
// that New did not make has no carriers, and a virtual thread started on
// it would never run.
func (s *Scheduler) check(op string) {
	if s == nil || s.ctx == nil {
		unusable(s, "Scheduler."+op+" on")
	}
}

// unusable panics for a call (what says which, ending in "on" or
// "with") given s, a nil *Scheduler or a zero Scheduler.
//
//go:noinline
func unusable(s *Scheduler, what string) {
	if s == nil {
		panic("scheduler: " + what + " a nil *Scheduler (New returns nil with an error: check it)")
	}
	panic("scheduler: " + what + " a zero Scheduler (make schedulers with New)")
}

// start starts fn in a new virtual thread, a child of g if g is not nil;
// its context derives from g's, or else from s's.
func (s *Scheduler) start(name string, g *Group, fn func(ctx context.Context) error) (*VThread, error) {
	return s.startFrom(name, g, fn, false)
}

// startFrom is start; whileClosing starts fn even once Shutdown or Close
// has begun (a deterministic AfterFunc's f, which real mode would run in
// a goroutine then too, and a draining scheduler waits for), unless the
// scheduler has drained. Only the deterministic carrier that fires the
// timer calls it so, while it is still looking for work, and that carrier
// runs the new thread. A timer already due when the last thread ends
// while closing fires at that carrier's next look, after the scheduler
// has drained: its f is dropped then, as a timer still pending is (the
// thread used to start, and was left parked for good if it parked, the
// carrier having seen the scheduler drained). The check and the count are
// one step under the detState's lock, with which checkDrained counts and
// closes allDone in deterministic mode.
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
		// Counted live before the check, so that Shutdown, which sets
		// closing before it counts, either waits for this one or is
		// seen.
		sh.started.Add(1)
		if s.closing.Load() {
			s.ended(sh)
			return nil, ErrClosed
		}
	}
	// Every pointer in the literal: while the collector marks, the stores
	// into the new, zeroed object share one write barrier call, which
	// records only the new pointers (there are no old ones to shade),
	// where a store after it records both, one call each.
	vt := &VThread{s: s, id: s.newID(c), group: g, fn: fn, cont: s.newCont(c)}
	if name != "" {
		vt.rareLocked().name = name
	}
	if l := profLabel(); l != nil {
		vt.rareLocked().labels = l // the caller's, as a go statement's
	}
	// vt.state is vtQueued, the zero value.
	if c != nil { // readyOn, without its call
		c.pushOwn(vt)
	} else {
		s.readyGlobal(vt)
	}
	return vt, nil
}

// newCont returns a continuation record for a new virtual thread: one
// that an ended virtual thread left on c, the calling carrier (nil if none
// of s's is), reset, or a new one. The slot it takes the record from keeps
// it (carrier.free), so that finish puts it back with no store if it ends
// on c.
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

// vthreadBody is the body of every virtual thread's continuation: it
// finds its virtual thread with Current, runs fn and records how it ended.
// A panic is recovered in its deferred call, bodyEnded, so it never
// reaches a carrier. Being one function for all, it needs no closure: a
// virtual thread is started with no allocation but its VThread (and, when
// no ended one's can be reused, its continuation record).
//
// The deferred call is a plain function and the outcome a field: a
// deferred closure or method value, or a local whose address is taken,
// would be a stack object in the body's frame, and a region holding stack
// objects cannot take weft's capture fast path. The body is in the region
// of a virtual thread's first parks (the thaw policy then leaves it frozen
// under the return barrier until the function returns: from the second
// park on, as a rule), and is one frame rather than a closure calling a
// method: each frame is frozen with every parked virtual thread.
func vthreadBody() {
	defer bodyEnded()
	vt := bodyVThread()
	fn := vt.fn
	vt.fn = nil
	bodyReturned(fn(&vt.ctx))
}

// bodyVThread returns the virtual thread whose body vthreadBody is: the
// owner of the innermost continuation, which in vthreadBody's frame and
// in the calls it makes after its function returned or unwound (nested
// continuations have unmounted by then, their deferred calls being
// deeper) is always the virtual thread's own. Cheaper than Current,
// which must check the scope; bodyEnded does the same inline.
func bodyVThread() *VThread {
	return weft.Innermost().Owner().(*VThread)
}

// bodyReturned records the error a virtual thread's function returned. It
// finds the virtual thread again rather than have vthreadBody keep vt
// across the call: a word less in the frame that every parked virtual
// thread has frozen at the bottom of its stack.
//
//go:noinline
func bodyReturned(err error) {
	vt := bodyVThread()
	if err != nil { // vt.err is nil until now: no write barrier for nil
		vt.err = err
	}
	vt.returned = true
}

// bodyEnded is vthreadBody's deferred call. A panic that reached it by
// way of the engine's return barrier, vthreadBody's frame being frozen
// (the thaw policy leaves it so from a thread's second park on), was
// raised again there: the stack where it was first raised is the
// engine's to give (weft.Cont.PanicStack).
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

// Context returns the virtual thread's context, the one its function
// gets.
func (vt *VThread) Context() context.Context {
	if vt == nil {
		nilVThread("Context")
	}
	return &vt.ctx
}

// vtContext is a virtual thread's context: its parent's (the scheduler's,
// or its group's) deadline, cancellation and values, and the virtual
// thread itself under vthreadKey. It lives in the VThread, so starting a
// virtual thread allocates no context and registers nothing with the
// parent: the parent's cancellation is the virtual thread's. It has no
// field: the parent is found from the VThread (parent), which saves the
// VThread an interface's two words, and a spawn their store.
type vtContext struct{}

// vt returns the VThread c is the ctx field of.
func (c *vtContext) vt() *VThread {
	return (*VThread)(unsafe.Add(unsafe.Pointer(c), -int(unsafe.Offsetof(VThread{}.ctx))))
}

// parent returns the context c derives from: the group's, for a child of
// a Group, or the scheduler's. Neither changes once made.
func (c *vtContext) parent() context.Context {
	vt := c.vt()
	if g := vt.group; g != nil {
		return g.ctx
	}
	return vt.s.ctx
}

type vthreadKey struct{}

func (c *vtContext) Deadline() (deadline time.Time, ok bool) { return c.parent().Deadline() }

func (c *vtContext) Done() <-chan struct{} { return c.parent().Done() }

func (c *vtContext) Err() error { return c.parent().Err() }

func (c *vtContext) Value(key any) any {
	if key == (vthreadKey{}) {
		return c.vt()
	}
	return c.parent().Value(key)
}

func (c *vtContext) String() string { return c.vt().String() + " context" }

// FromContext returns the virtual thread whose context ctx is or derives
// from, or nil.
func FromContext(ctx context.Context) *VThread {
	vt, _ := ctx.Value(vthreadKey{}).(*VThread)
	return vt
}

// Scheduler returns the scheduler the virtual thread runs on.
func (vt *VThread) Scheduler() *Scheduler {
	if vt == nil {
		nilVThread("Scheduler")
	}
	return vt.s
}

// String returns "vthread ID", followed by the name in parentheses if it
// has one; "vthread <nil>" for a nil *VThread.
func (vt *VThread) String() string {
	if vt == nil {
		return "vthread <nil>"
	}
	if name := vt.Name(); name != "" {
		return fmt.Sprintf("vthread %d (%s)", vt.id, name)
	}
	return fmt.Sprintf("vthread %d", vt.id)
}

// Done returns a channel closed when the virtual thread has finished.
func (vt *VThread) Done() <-chan struct{} {
	if vt == nil {
		nilVThread("Done")
	}
	vt.joinMu.Lock()
	defer vt.joinMu.Unlock()
	r := vt.rareLocked()
	if r.done == nil {
		r.done = make(chan struct{})
		if vt.ended {
			close(r.done)
		}
	}
	return r.done
}

// finished reports whether the virtual thread has finished; vt.err is
// then final.
func (vt *VThread) finished() bool { return vt.state.Load() == vtDone }

// Join waits for the virtual thread to finish and returns the error its
// function returned, a *PanicError if it panicked, or ErrGoexit. Called
// from a virtual thread it parks; from a goroutine it blocks.
//
// Called from a virtual thread on the stack-copying backend, outside
// deterministic mode, Join may run vt itself when vt is still queued on
// the caller's carrier, one of the last queued there (as a fork/join
// pool runs a queued subtask in its join), and the caller is not inside
// a continuation of its own making (a continuation.Pull, say): vt then
// runs inside the caller, on its carrier, until vt finishes or parks,
// which saves parking the caller and resuming it. Stack traces taken in
// vt then show the caller's frames under vt's; otherwise only
// runtime.Goexit tells the two apart: it ends the goroutine, so a Goexit
// in vt, if vt runs inside the caller, ends the caller too (both end with
// ErrGoexit, and the caller's deferred calls run). Wait never runs vt
// itself; use it where a Goexit in vt must leave the caller running.
func (vt *VThread) Join() error {
	if vt == nil {
		nilVThread("Join")
	}
	if vt.finished() {
		return vt.err
	}
	if cur, top := currentTop(); cur != nil {
		if cur == vt {
			panic("scheduler: a virtual thread cannot Join itself")
		}
		if top && runNested(cur, vt) && vt.finished() {
			return vt.err
		}
		vt.joinMu.Lock()
		switch {
		case vt.ended:
			vt.joinMu.Unlock()
		case vt.joiner == nil:
			vt.joiner = cur
			vt.joinMu.Unlock()
			// finish unparks cur once vt is done; a wake-up from
			// elsewhere is spurious.
			for !vt.finished() {
				cur.park()
			}
		default:
			w := newWaiter()
			r := vt.rareLocked()
			w.next, r.joinq = r.joinq, w
			vt.joinMu.Unlock()
			w.wait()
		}
		return vt.err
	}
	<-vt.Done()
	return vt.err
}

// addJoiner queues a waiter for the calling virtual thread on vt's end, or
// returns nil if vt has already finished.
func (vt *VThread) addJoiner() *waiter {
	vt.joinMu.Lock()
	defer vt.joinMu.Unlock()
	if vt.ended {
		return nil
	}
	w := newWaiter()
	r := vt.rareLocked()
	w.next, r.joinq = r.joinq, w
	return w
}

// dropJoiner takes w off vt's joiners, if its wait ended before vt did
// (finish takes them all off otherwise).
func (vt *VThread) dropJoiner(w *waiter) {
	vt.joinMu.Lock()
	for p := &vt.rareLocked().joinq; *p != nil; p = &(*p).next {
		if *p == w {
			*p, w.next = w.next, nil
			break
		}
	}
	vt.joinMu.Unlock()
}

// Wait is Join with a context: it returns ctx.Err() if ctx ends first.
// Unlike Join, it never runs vt inside the caller. A virtual thread that
// waits for itself panics, as Join does, and so does a nil ctx.
func (vt *VThread) Wait(ctx context.Context) error {
	if vt == nil {
		nilVThread("Wait")
	}
	if ctx == nil {
		nilContext("VThread.Wait")
	}
	if vt.finished() {
		return vt.err
	}
	if cur := Current(); cur != nil {
		if cur == vt {
			panic("scheduler: a virtual thread cannot Wait for itself")
		}
		if w := vt.addJoiner(); w != nil {
			stop := cur.s.watchContext(ctx, func() { w.wake() }) // the waiter's scheduler's
			w.wait()
			stop()
			vt.dropJoiner(w)
		}
	} else {
		select {
		case <-vt.Done():
		case <-ctx.Done():
		}
	}
	if vt.finished() {
		return vt.err
	}
	return ctx.Err()
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
// does: a caller with both inline finds a virtual thread in its own code
// with Innermost's call alone, where Current is a call more (unparkOn,
// on the path of every wake-up by a virtual thread).
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

// currentTop returns the calling virtual thread, or nil, and whether the
// code calling it runs directly in that virtual thread's continuation:
// not in a continuation that its body mounted (a continuation.Pull, say),
// whose yields a virtual thread run nested there could reach.
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

// Park parks the calling virtual thread until Unpark is called for it,
// with java.util.concurrent.locks.LockSupport semantics: a permit that
// Unpark makes available and Park consumes, so an Unpark before the Park
// is not lost. Park may also return spuriously; callers re-check their
// condition in a loop. Called from a plain goroutine it panics.
//
// The package's own waits (Join, Wait, Chan, Mutex, Cond and the rest)
// park on the same permit: an Unpark that comes while the thread waits in
// one of them is used up there (the wait looks at its condition again
// and parks on), as in Java's locks, and the next Park does not see it.
// Sleep and SleepContext keep it for the next Park.
//
// If the virtual thread cannot be suspended (it is pinned: a cgo callback,
// pinning.Do, a reflect call... on its stack), Park blocks its carrier
// instead, and the scheduler may start an extra carrier meanwhile.
func Park() {
	var vt *VThread // Current, with currentIn inline
	if k := weft.Innermost(); k != nil {
		vt = currentIn(k)
	}
	if vt == nil {
		parkOutside()
	}
	// vt.park, by hand: one frame less to freeze with every virtual
	// thread parked here.
	if vt.permit.Load() && vt.permit.CompareAndSwap(true, false) {
		return
	}
	vt.action = actPark
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		parkPinned(perr)
	}
	vt.permit.CompareAndSwap(true, false)
}

// parkOutside panics for Park called outside a virtual thread. A panic
// in Park itself would give its frame, which every virtual thread parked
// there has frozen, an argument area for the panic's two-word value.
//
//go:noinline
func parkOutside() {
	panic("scheduler.Park: not called from a virtual thread")
}

func (vt *VThread) park() {
	if vt.permit.Load() && vt.permit.CompareAndSwap(true, false) {
		return
	}
	vt.action = actPark
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		parkPinned(perr)
	}
	vt.permit.CompareAndSwap(true, false)
}

// Unpark makes the permit of vt available and, if vt is parked, makes it
// runnable. It may be called from any goroutine or virtual thread.
func (vt *VThread) Unpark() {
	if vt == nil {
		nilVThread("Unpark")
	}
	vt.unparkOn(nil)
}

// nilContext panics for a call of fn with a nil context.Context, which
// the context package forbids.
//
//go:noinline
func nilContext(fn string) {
	panic("scheduler: " + fn + " with a nil Context (pass context.Background() or context.TODO() for none)")
}

// nilVThread panics for a method called on a nil *VThread, with a message
// that says where such a handle usually comes from.
func nilVThread(method string) {
	panic("scheduler: VThread." + method + " on a nil *VThread (Current returns nil outside a virtual thread, and Go and GoNamed return nil with an error)")
}

// unparkOn is Unpark called by carrier c itself, outside any virtual
// thread, or by anyone else with c nil: c queues vt if it makes it
// runnable.
func (vt *VThread) unparkOn(c *carrier) {
	vt.permit.Store(true)
	switch {
	case vt.state.CompareAndSwap(vtParked, vtQueued):
		vt.enqueue(c)
	case vt.state.CompareAndSwap(vtPinned, vtRunning):
		// vt waits in parkPinned for this, on its carrier, which it
		// cannot leave before it has it.
		vt.carrier.pinned <- struct{}{}
	}
}

// unparkClaimed wakes vt for a waiter of its that the caller has just
// claimed (moved from waiting to woken or timedOut). If vt is parked, it
// makes it runnable without its permit: vt waits in a loop that ends on
// the waiter's state (sendWait, recvWait, parkUntilWoken), which the
// claim has changed, so it needs the wake-up and not the permit, whose
// one use there would be to be cleared after the park (the package's
// waits use up an Unpark that comes during them). Only the
// compare-and-swap from parked tells that vt is parked: if it fails, vt
// runs and may be about to park (run stores vtParked, then loads the
// permit), or is blocked pinned (parkPinned stores vtPinned, then loads
// the permit), and the wake-up is Unpark's: the permit's store, then the
// compare-and-swaps, so that either vt's load sees the permit or a swap
// sees vt parked or pinned. (Sleep, which keeps an Unpark that wakes it
// for the next Park, waits on no waiter: Unpark sets its permit always.)
// sendWait and recvWait have it written out.
func (vt *VThread) unparkClaimed() {
	if vt.state.CompareAndSwap(vtParked, vtQueued) {
		vt.enqueue(nil)
		return
	}
	vt.unparkOn(nil)
}

// enqueue queues vt, which its caller has just moved from parked to
// queued, on c, or with c nil on the carrier running the caller if vt's
// scheduler runs it, else as readyOn does without a carrier.
func (vt *VThread) enqueue(c *carrier) {
	if c == nil {
		// runningCarrier, with Current written out: Innermost and
		// currentIn inline, and a wake-up by a virtual thread (every
		// Chan hand-off's) finds its carrier without Current's call.
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
	// pushOwn's usual case, into an empty runnext, written out (its
	// comment says why the store comes before the load of nidle).
	if c.runnextOK && c.rn.Load() == rnNone {
		c.runnext = vt
		c.rn.Store(vt.id)
		if c.s.nidle.Load() != 0 {
			c.oweWake()
		}
		return
	}
	c.pushOwn(vt)
}

// parkKeep is park without taking the permit after a wake-up: an Unpark
// that came while vt was queued stays for its caller to see.
func (vt *VThread) parkKeep() {
	vt.action = actPark
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		parkPinned(perr)
	}
}

// wakeTimer is a Sleep timer's wake-up (or SleepContext's context
// watch's, with fired nil: isDone tells): it sets fired and makes vt
// runnable without its permit if vt is parked; otherwise (vt runs, and
// may be about to park) through the permit, as Unpark. The permit then
// stands for other Unparks only, which the sleep keeps for the next Park.
func (vt *VThread) wakeTimer(fired *atomic.Bool) {
	if fired != nil {
		fired.Store(true)
	}
	switch {
	case vt.state.CompareAndSwap(vtParked, vtQueued):
		vt.s.readyOn(vt, vt.s.runningCarrier())
	case vt.state.CompareAndSwap(vtPinned, vtRunning):
		vt.carrier.pinned <- struct{}{}
	default:
		vt.Unpark()
	}
}

// Yield lets other runnable virtual threads run before the caller goes on.
// From a plain goroutine it calls runtime.Gosched.
//
// A virtual thread that cannot be suspended (it is pinned: pinning.Do, a
// cgo callback, its thread locked...) keeps its carrier: Yield counts the
// pin in Pins and calls runtime.Gosched, and the others run meanwhile only
// on other carriers. Unlike a pinned park, a pinned Yield starts no
// compensation carrier, so with one carrier (or every other one busy) a
// loop that yields while pinned, waiting for another virtual thread, waits
// for ever; park instead (a Chan, a WaitGroup, Park), which blocks the
// carrier and lets a compensation carrier run the others.
func Yield() {
	vt := Current()
	if vt == nil {
		runtime.Gosched()
		return
	}
	vt.action = actYield
	if _, perr := weft.Yield(vthreadScope); perr != nil {
		vt.s.countPin(perr)
		// What vt queued on its carrier, which it keeps, must not wait
		// for the monitor: an idle carrier is woken for it now, as a
		// pinned park does.
		vt.carrier.payOwed()
		runtime.Gosched()
	}
}

// Sleep pauses the calling virtual thread for at least d (by the
// scheduler's clock: virtual in deterministic mode). An Unpark that comes
// before or during it does not end it, and is not lost: the next Park
// returns at once. Nor does cancelling a context: SleepContext is the
// Sleep that one can end. From a plain goroutine it calls time.Sleep.
//
// Outside deterministic mode, a timer that fires while the thread is not
// parked (a d shorter than the time the thread takes to park, or a timer
// that fires just as the sleep ends) wakes it through its permit, as
// Unpark does, and may so leave the thread unparked once after Sleep has
// returned: the next Park may then return spuriously, as Park may.
func Sleep(d time.Duration) {
	vt := Current()
	if vt == nil {
		time.Sleep(d)
		return
	}
	if d <= 0 {
		Yield()
		return
	}
	vt.sleepUntil(d, nil)
}

// sleepUntil parks vt until its timer for d has fired or done (a
// context's Done channel, nil for none) is closed; whoever closes done
// must wake vt with wakeTimer. Sleep and SleepContext share it.
func (vt *VThread) sleepUntil(d time.Duration, done <-chan struct{}) {
	var fired atomic.Bool
	t := vt.s.afterFunc(d, func() { vt.wakeTimer(&fired) })
	woken := false
	for !fired.Load() && !isDone(done) { // the timer fires once d has passed
		// A permit here is neither the timer's nor done's (they wake
		// by state, or set the permit only while vt runs, after their
		// flag): take it and remember to give it back.
		if vt.permit.Load() && vt.permit.CompareAndSwap(true, false) {
			woken = true
			continue
		}
		vt.parkKeep()
	}
	t.Stop()
	if woken {
		// Give it back, as Loom's sleep does: a Park after the sleep
		// returns at once rather than missing that wake-up (Park may
		// return spuriously, so a caller loses nothing if it was the
		// timer's after all).
		vt.permit.Store(true)
	}
}

// SleepContext is Sleep that ctx can end: it pauses the calling virtual
// thread until d has passed (by the scheduler's clock: virtual in
// deterministic mode) and returns nil, or until ctx ends and returns
// ctx.Err(), whichever comes first. A ctx that has already ended returns
// ctx.Err() at once, without a yield. Closing the scheduler, or a
// Shutdown whose context ends, cancels every virtual thread's context:
// a thread sleeping on its own context wakes then, where Sleep would
// keep Close waiting for the rest of its sleep.
//
// If d passes and ctx ends at about the same time, ctx wins: SleepContext
// looks at ctx once more when it wakes and returns ctx.Err() if it has
// ended, even if d has passed too. So it returns nil only if d has passed
// and ctx had not ended when the sleep ended, never before d has passed.
// (In deterministic mode, with the sleep due at virtual time T and ctx
// cancelled at T by another virtual thread, the result depends on which
// of the two the seed runs first.)
//
// As with Sleep, an Unpark that comes before or during the sleep does
// not end it and is not lost: the next Park returns at once. When it
// returns, SleepContext has stopped its timer and its watch on ctx;
// nothing stays registered. (A timer or watch that fires just as the
// sleep ends may still unpark the thread once after it has returned: the
// next Park may then return spuriously, as Park may.)
//
// From a plain goroutine it waits on a time.Timer and ctx.Done(). A nil
// ctx panics.
func SleepContext(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		nilContext("SleepContext")
	}
	done := ctx.Done()
	if isDone(done) {
		return ctx.Err()
	}
	vt := Current()
	if vt == nil {
		return sleepOutside(ctx, d)
	}
	if done == nil { // a context that never ends
		Sleep(d)
		return nil
	}
	if d <= 0 {
		Yield()
		if isDone(done) {
			return ctx.Err()
		}
		return nil
	}
	stop := vt.s.watchContext(ctx, func() { vt.wakeTimer(nil) })
	vt.sleepUntil(d, done)
	stop()
	if isDone(done) {
		return ctx.Err()
	}
	return nil
}

// sleepOutside is SleepContext called from a plain goroutine, ctx not
// done at the call: it blocks on a wall-clock timer, ctx winning a tie as
// in a virtual thread.
func sleepOutside(ctx context.Context, d time.Duration) error {
	done := ctx.Done()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
	}
	if isDone(done) {
		return ctx.Err()
	}
	return nil
}

// isDone reports whether done, a context's Done channel (nil for one that
// never ends), is closed.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// parkPinned blocks the carrier of the virtual thread whose park could
// not suspend it, until Unpark. It takes the one argument and finds the
// virtual thread itself: the frames of Park and park, which every parked
// virtual thread has frozen, hold the argument area of their largest call,
// and a call with three words of arguments here made each two words
// larger. The go:noinline keeps it so.
//
//go:noinline
func parkPinned(perr *pinning.Error) {
	vt := Current()
	s := vt.s
	s.countPin(perr)
	// Published to unparkOn by the store of vtPinned, and the same until
	// it has sent: vt cannot leave its carrier before.
	c := vt.carrier
	c.payOwed() // what vt queued here must not wait for the monitor
	vt.state.Store(vtPinned)
	if vt.permit.Load() && vt.state.CompareAndSwap(vtPinned, vtRunning) {
		return
	}
	s.blocked.Add(1)
	s.startTemp() // if fewer run than are blocked, up to MaxCompensation
	<-c.pinned
	s.blocked.Add(-1)
	s.wakeSurplusTemp()
}

// PinSite identifies where virtual threads were pinned: the reason and the
// function whose frame pinned.
type PinSite struct {
	Reason   pinning.Reason // why the virtual thread could not be suspended
	Function string         // the function of the pinning.Error's Frame; "" if unknown
}

func (s *Scheduler) countPin(perr *pinning.Error) {
	site := PinSite{Reason: perr.Reason, Function: perr.Frame.Function}
	s.pinMu.Lock()
	s.pins[site]++
	s.pinMu.Unlock()
}

// PinEvent is one row of Pins.
type PinEvent struct {
	PinSite
	Count uint64 // how many parks and yields pinned there
}

// Pins returns how many times virtual threads could not be suspended when
// they parked or yielded, by reason and site, most frequent first.
func (s *Scheduler) Pins() []PinEvent {
	s.check("Pins")
	s.pinMu.Lock()
	out := make([]PinEvent, 0, len(s.pins))
	for k, v := range s.pins {
		out = append(out, PinEvent{k, v})
	}
	s.pinMu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].Reason != out[j].Reason {
			return out[i].Reason < out[j].Reason
		}
		return out[i].Function < out[j].Function
	})
	return out
}

// Live returns the number of virtual threads started and not finished.
// While others start and finish, it is a count the scheduler had at some
// moment during the call, or, if threads end during every try to take
// one, a count that includes every virtual thread live throughout the
// call and possibly some that started and ended during it.
func (s *Scheduler) Live() int {
	s.check("Live")
	best := int64(math.MaxInt64)
	for range liveTries {
		n, stable := s.liveSnapshot()
		if stable {
			return int(n)
		}
		// Each try counts at least the threads live throughout it: the
		// least counts the fewest that were not.
		best = min(best, n)
	}
	return int(best)
}

// liveTries is how many times Live tries for a snapshot in which no
// virtual thread ended.
const liveTries = 8

// liveSnapshot is liveCount with the ended counts read again after the
// started ones: if none moved (each only grows, so equal sums mean equal
// counts), no virtual thread ended while the started counts were read,
// during which the count only grew, one start at a time, and the result
// is one it had. It reports whether none moved.
func (s *Scheduler) liveSnapshot() (n int64, stable bool) {
	e := s.endedSum()
	n = s.startedSum() - e
	return n, s.endedSum() == e
}

func (s *Scheduler) endedSum() int64 {
	e := s.outside.ended.Load()
	for _, c := range s.carriers {
		e += c.count.ended.Load()
	}
	return e
}

func (s *Scheduler) startedSum() int64 {
	n := s.outside.started.Load()
	for _, c := range s.carriers {
		n += c.count.started.Load()
	}
	return n
}

// A liveShard counts the virtual threads started and ended at one place;
// a thread may end at another place than it started.
type liveShard struct {
	started, ended atomic.Int64
}

// shard returns where a virtual thread started or ended by code running
// on c (nil: not on a carrier of s) is counted: c's shard, written only
// by what c runs, or, for a compensation carrier, which may exit with its
// counts, the shared one.
func (s *Scheduler) shard(c *carrier) *liveShard {
	if c == nil || c.temp {
		return &s.outside
	}
	return &c.count
}

// liveCount adds up the shards. It reads every ended count before any
// started count: a virtual thread's start comes before its end, so one
// counted ended is counted started too, and the sum is never less than
// the number of virtual threads live throughout the reads (it may be
// more: threads that start and end while it reads are counted). Once
// closing is set it is 0 only when none is live: a start after that
// either sees closing, and counts itself out, or is counted here (it
// counts itself in before it loads closing, and the caller had stored
// closing, or seen it set, before it called this).
func (s *Scheduler) liveCount() int64 {
	e := s.endedSum()
	return s.startedSum() - e
}

// idBatch is how many IDs a carrier takes at a time for the virtual
// threads started on it, as the runtime hands goroutine IDs to its Ps.
const idBatch = 64

// newID returns a new virtual thread's ID, from c's batch if it is one of
// s's ordinary carriers (so IDs are unique, but not in the order the
// threads started). Deterministic mode numbers them in order.
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

// finish records the end of vt, run on its carrier c. The virtual threads
// joining vt go on c's run queue, as they would if vt had woken them
// itself, so that a joining parent runs next, keeping a spawning tree depth
// first; c is nil where the carrier cannot take them (Goexit).
func (s *Scheduler) finish(vt *VThread, c *carrier) {
	if g := vt.group; g != nil {
		g.childEnded(vt)
	}
	if vt.node != nil { // each pointer cleared only if set: no write barrier
		vt.node = nil // a handle kept after the end keeps no channel node
	}
	if cont := vt.cont; cont.IsDone() {
		// Nothing else refers to the record: keep it for the next
		// virtual thread started on c, or drop it (a Goexit, c nil: a
		// record that was reused keeps its arrays when it ends, which a
		// handle kept after the end would keep too). (IsDone also holds
		// for a record abandoned while suspended and still unwinding,
		// which Reset refuses; the scheduler never abandons one.)
		vt.cont = nil
		if c != nil && len(c.free) < maxFree {
			c.keep(cont)
		}
	}
	vt.state.Store(vtDone)
	// Counted out as soon as its state says so, and before its joiners
	// and its Done channel are told: Live after a Join or Wait that
	// returned, or after Done closed, does not count it (a Join that
	// finds the state done in the instant before the count drops may
	// still see it counted). Counted out after the state, so that when
	// the last one out while closing lets the carriers exit, every
	// virtual thread's state says done; this carrier finishes this call
	// first, and Shutdown waits for it.
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
	if h := finishHook.Load(); h != nil {
		(*h)(vt)
	}
}

// finishHook, if set (by tests), is called at the end of finish: a test
// holds the carrier there to look at what the joiners it woke see.
var finishHook atomic.Pointer[func(*VThread)]

// ended counts a virtual thread out in sh; the last one out after Shutdown
// or Close began lets them and the carriers finish. (Every one counted out
// after that adds up the shards, one pass each, which costs a read of
// every carrier's cache line per end while a shutdown drains; one of the
// last two to end concurrently sees the other's end, as each counts
// itself out before it looks.)
func (s *Scheduler) ended(sh *liveShard) {
	sh.ended.Add(1)
	if s.closing.Load() {
		s.checkDrained()
	}
}

// checkDrained closes allDone and wakes the carriers if nothing is live;
// closing is set.
func (s *Scheduler) checkDrained() {
	if d := s.det; d != nil {
		// One step with the check of a deterministic AfterFunc's start
		// (startFrom): a thread it starts is counted, or sees allDone
		// closed and does not start.
		d.mu.Lock()
		n := s.liveCount()
		if n == 0 {
			s.doneOne.Do(func() { close(s.allDone) })
		}
		d.mu.Unlock()
		if n == 0 {
			s.wakeAll()
		}
		return
	}
	if s.liveCount() == 0 {
		s.doneOne.Do(func() { close(s.allDone) })
		s.wakeAll()
	}
}

// drained reports whether the scheduler has shut down and nothing is live.
func (s *Scheduler) drained() bool {
	select {
	case <-s.allDone:
		return true
	default:
		return false
	}
}

// Shutdown stops accepting new virtual threads and waits for the running
// ones to finish (draining); the carriers have exited when it returns nil.
// If ctx ends first, Shutdown cancels the contexts of the virtual threads
// still running and returns ctx.Err() without waiting further, as
// http.Server.Shutdown does: the carriers exit once the last of them has
// finished. Cancelling a context does not interrupt a Park or a Sleep, so
// a virtual thread must watch its context to be cancelled: sleep with
// SleepContext, and wait with the calls that take a context (VThread.Wait,
// Semaphore.Acquire, Chan.RecvContext...). Called from one of s's own
// virtual threads, which it would wait for, or with a nil ctx, it panics
// before it changes anything. Called from another scheduler's virtual
// thread, it parks that thread while it waits (a goroutine of its own
// waits), so that its carrier goes on running the others.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.check("Shutdown")
	if ctx == nil {
		nilContext("Scheduler.Shutdown")
	}
	s.notFromOwn("Shutdown")
	s.closing.Store(true)
	s.checkDrained()
	s.wakeAll()
	var err error
	blockParked(func() {
		select {
		case <-s.allDone:
		case <-ctx.Done():
			select {
			case <-s.allDone: // both were ready: it drained
			default:
				s.cancel()
				err = ctx.Err()
				return
			}
		}
		s.cancel()
		s.wakeAll()
		s.wg.Wait()
	})
	return err
}

// blockParked calls wait, which blocks; called from a virtual thread (of
// another scheduler: Shutdown and Close), it calls wait in a goroutine of
// its own and parks until wait has returned, so that its carrier runs
// other virtual threads meanwhile, which the wait may well be for.
func blockParked(wait func()) {
	if Current() == nil {
		wait()
		return
	}
	w := newWaiter()
	go func() {
		wait()
		w.wake()
	}()
	w.wait()
}

// notFromOwn panics if a virtual thread of s calls its method op, which
// would wait for that virtual thread to finish.
func (s *Scheduler) notFromOwn(op string) {
	if vt := Current(); vt != nil && vt.s == s {
		panic("scheduler." + op + ": called from one of the scheduler's own virtual threads, which it would wait for forever; call it from a plain goroutine (or another scheduler's virtual thread)")
	}
}

// Close cancels every virtual thread's context, waits for them all to
// finish, and stops the carriers. Cancelling does not interrupt a Park or
// a Sleep: Close waits for the rest of a thread's Sleep, where a
// SleepContext on the thread's context returns at once (see Shutdown).
// Called from one of s's own virtual threads, which it would wait for, it
// panics; from another scheduler's, it parks that thread while it waits,
// as Shutdown does.
func (s *Scheduler) Close() error {
	s.check("Close")
	s.notFromOwn("Close")
	s.closing.Store(true)
	s.cancel()
	s.checkDrained()
	s.wakeAll()
	blockParked(func() {
		<-s.allDone
		s.wakeAll()
		s.wg.Wait()
	})
	return nil
}
