package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/weftrt/weft"
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
	// CPUs, if not empty, binds carrier i to CPU CPUs[i%len(CPUs)], for
	// thread-per-core use. It works on Linux only; elsewhere New returns
	// an error. The CPUs must be ones the process may run on, numbered
	// below 1024 (unix.CPUSet). It needs carriers locked to their threads
	// (LockOSThread); New returns an error otherwise. A compensation
	// carrier (MaxCompensation) is bound to all of CPUs. A carrier's
	// thread gets its affinity back when the carrier exits.
	CPUs []int
	// MaxCompensation bounds the extra carriers, one for each virtual
	// thread that is blocked pinned, holds its carrier without parking
	// (Held) or calls Blocking. 0 means Carriers; negative means none.
	MaxCompensation int
	// LockOSThread locks each carrier to its OS thread. The default, nil,
	// locks carriers on the stack-copying backend, not on the portable
	// one. A portable continuation must be resumed under the thread
	// locking it was first run under (docs/limitations.md).
	//
	// Waking a sleeping locked carrier hands a P to its thread. That is
	// slower than waking an unlocked one, a goroutine like any other. So
	// a scheduler whose virtual threads are mostly woken by plain
	// goroutines (Unpark, a Chan send, Go not followed by Join) runs
	// faster unlocked (false). A Join right after Go runs the thread on
	// the caller either way (VThread.Join). None of that holds if it
	// binds carriers to CPUs. docs/benchmarks.md has the numbers.
	LockOSThread *bool
	// Deterministic runs one carrier that picks the next runnable virtual
	// thread with a random generator seeded by Seed. Sleep and timers get
	// a virtual clock that jumps to the next timer when nothing is
	// runnable. The same program with the same seed interleaves the same
	// way, as long as only virtual threads of this scheduler wake each
	// other: no plain goroutines, no I/O. There is no compensation
	// carrier. A virtual thread that parks while pinned (Pins counts it)
	// blocks the only carrier until it is unparked from outside. In a
	// simulation that is never. So a deterministic program must not block
	// inside pinning.Do, a cgo callback or a reflect.MakeFunc function,
	// or with its thread locked. No monitor runs, so no held carrier is noticed
	// (Held). A virtual thread that blocks in time.Sleep, a Go channel or
	// a system call blocks the simulation. Blocking just calls its
	// function. Deterministic overrides Carriers and MaxCompensation: one
	// carrier, none extra. So one Options can run either way by setting
	// Deterministic alone.
	Deterministic bool
	// Seed seeds the deterministic mode's choice of the next virtual
	// thread. It is unused unless Deterministic is set.
	Seed uint64
	// OnPanic, if set, is called with each virtual thread that panicked
	// and the panic value, before Join returns it. It runs in that
	// thread's last deferred call, while the panic is being recovered.
	// The thread is pinned there, so OnPanic must not block or park. A
	// park would block its carrier; in deterministic mode, the scheduler
	// for good. A panic raised by OnPanic itself is not recovered. It
	// ends the program, as an unrecovered panic in a goroutine does. So
	// re-panicking makes virtual threads' panics fatal. For a virtual
	// thread that ran inside its joiner's Join, it unwinds into the
	// joiner first.
	OnPanic func(vt *VThread, v any)
	// Context is the parent of every virtual thread's context. nil means
	// context.Background().
	Context context.Context
	// TrackThreads keeps a registry of the scheduler's virtual threads,
	// as Loom's jdk.trackAllThreads does. Threads then lists them with
	// their state and stack; package vtprof dumps them. It costs a
	// registration at each start and end, and the call stack of each
	// start. Without it Threads lists none and a dump gives counts only.
	TrackThreads bool

	// contStats gives virtual threads' continuation records the engine's
	// counters (weft.NewCont), which tests read. Without them a parked
	// virtual thread is 96 bytes smaller (weft.NewUncountedCont).
	contStats bool
}

// Scheduler runs virtual threads on carrier goroutines. Make one with
// New. Every method of a zero Scheduler panics, saying so. So does every
// method of a nil *Scheduler, as New returns with an error.
type Scheduler struct {
	opts     Options
	ctx      context.Context
	cancel   context.CancelFunc
	lock     bool
	carriers []*carrier
	// labels are the profiler labels of the goroutine that called New.
	// They are every carrier's own (labels.go).
	labels unsafe.Pointer
	// reg is the thread registry (registry.go), nil unless TrackThreads.
	reg *registry
	// nest: Join may run a queued virtual thread nested in its caller
	// (runNested). It is false in deterministic mode and on the portable
	// backend.
	nest bool
	// closing is set once Shutdown or Close begins; every start reads it.
	closing atomic.Bool

	// Every carrier writes the fields from here to the next pad as it
	// goes idle, wakes, or uses the global queue. They sit on cache lines
	// of their own, so the reads above, on every start, do not miss.
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
	// shards. So carriers starting and finishing them on many CPUs do not
	// all write one cache line. Each ordinary carrier's shard counts what
	// the virtual threads it runs start and what ends on it. outside
	// counts the rest: starts from plain goroutines, starts and ends on
	// compensation carriers, ends after a Goexit. liveCount and Live add
	// them up. outside and ids, written by starts from outside the
	// carriers, have a cache line of their own too.
	outside liveShard
	ids     atomic.Uint64 // the last ID handed out, singly or in a carrier's batch
	_       cpu.CacheLinePad
	allDone chan struct{} // closed when closing and the live count reaches 0
	doneOne sync.Once
	wg      sync.WaitGroup // carriers and the monitor

	// The monitor (monitor.go) pays the wake-ups that carriers owe. It
	// looks for held carriers (held.go).
	tick          atomic.Uint64 // the monitor's tick count, from 1
	monitorParked atomic.Bool   // the monitor waits for monitorKick, or its next look
	monitorIdle   atomic.Bool   // the monitor waits for monitorKick only: no carrier runs
	monitorKick   chan struct{} // buffered 1
	// outsideKick wakes the waker goroutine (outside.go), where a Join
	// may run a thread that a plain goroutine started (nest). It is nil
	// otherwise. Buffered 1.
	outsideKick chan struct{}

	heldMu  sync.Mutex
	heldLog []*HeldEvent // the latest maxHeldEvents, oldest first
	holds   atomic.Int32 // carriers held now, which compensation carriers stand in for as for blocked
	// lastDump is when the monitor last took every goroutine's
	// traceback for a held carrier (held.go). Only the monitor touches
	// it.
	lastDump time.Time

	pinMu sync.Mutex
	pins  map[PinSite]uint64
	// prof holds the pinning and park profiles (profiling.go). It is
	// written while they record, so it is off the cache lines that every
	// start reads.
	prof profState

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
	s := &Scheduler{opts: opts, allDone: make(chan struct{}), pins: make(map[PinSite]uint64), monitorKick: make(chan struct{}, 1)}
	s.tick.Store(1)
	s.labels = profLabel()
	if opts.TrackThreads {
		s.reg = newRegistry(s)
	}
	s.ctx, s.cancel = context.WithCancel(parent)
	s.lock = weft.ActiveBackend() == weft.StackCopying
	if opts.LockOSThread != nil {
		s.lock = *opts.LockOSThread
	}
	if s.lock && weft.ActiveBackend() != weft.StackCopying && (opts.Carriers > 1 || opts.MaxCompensation >= 0) {
		// A portable continuation must be resumed under the thread
		// locking it was first run under. Virtual threads move between
		// carriers.
		s.cancel()
		return nil, errors.New("scheduler: on the portable backend, carriers locked to OS threads need Carriers: 1 and MaxCompensation: -1 (" + weft.Backend() + ")")
	}
	if len(opts.CPUs) > 0 && !s.lock {
		// Binding an unlocked carrier would bind whichever thread it was
		// on, for other goroutines, not the carrier.
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
	if s.nest {
		s.outsideKick = make(chan struct{}, 1)
		s.wg.Add(1)
		go s.waker()
	}
	return s, nil
}

// check panics, for the method op, if s is nil or a zero Scheduler. One
// that New did not make has no carriers. A virtual thread started on it
// would never run.
func (s *Scheduler) check(op string) {
	if s == nil || s.ctx == nil {
		unusable(s, "Scheduler."+op+" on")
	}
}

// unusable panics for a call given s, a nil *Scheduler or a zero
// Scheduler. what names the call, ending in "on" or "with".
//
//go:noinline
func unusable(s *Scheduler, what string) {
	if s == nil {
		panic("scheduler: " + what + " a nil *Scheduler (New returns nil with an error: check it)")
	}
	panic("scheduler: " + what + " a zero Scheduler (make schedulers with New)")
}

// ended counts a virtual thread out in sh. The last one out after
// Shutdown or Close began lets them and the carriers finish. Once closing
// is set, every one counted out adds up the shards, one pass each. Each
// counts itself out before it looks. So of the last two to end
// concurrently, one sees the other's end.
func (s *Scheduler) ended(sh *liveShard) {
	sh.ended.Add(1)
	if s.closing.Load() {
		s.checkDrained()
	}
}

// checkDrained closes allDone and wakes the carriers if nothing is
// live. closing is set.
func (s *Scheduler) checkDrained() {
	if d := s.det; d != nil {
		// One step with the check of a deterministic AfterFunc's start
		// (startFrom). A thread it starts is counted, or sees allDone
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
// ones to finish (draining). When it returns nil, the carriers have
// exited. If ctx ends first, Shutdown cancels the contexts of the
// virtual threads still running. It then returns ctx.Err() without
// waiting further, as http.Server.Shutdown does. The carriers exit once
// the last of them has finished. Cancelling a context does not interrupt
// a Park or a Sleep. So a virtual thread must watch its context to be
// cancelled: sleep with SleepContext, and wait with the calls that take
// a context (VThread.Wait, Semaphore.Acquire, Chan.RecvContext and so
// on). Called from one of s's own virtual threads, which it would wait
// for, or with a nil ctx, it panics before it changes anything. Called
// from another scheduler's virtual thread, it parks that thread while a
// goroutine of its own waits. So that carrier goes on running the others.
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

// blockParked calls wait, which blocks. Shutdown and Close call it from
// a virtual thread of another scheduler. It then calls wait in a
// goroutine of its own and parks until wait has returned. So its carrier
// runs other virtual threads meanwhile, which the wait may well be for.
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
// finish, and stops the carriers. Cancelling does not interrupt a Park
// or a Sleep. Close waits for the rest of a thread's Sleep. A
// SleepContext on the thread's context returns at once (see Shutdown).
// Called from one of s's own virtual threads, which it would wait for,
// it panics. Called from another scheduler's, it parks that thread while
// it waits, as Shutdown does.
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
