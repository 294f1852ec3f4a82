package scheduler

import (
	"iter"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"golang.org/x/sys/cpu"

	"github.com/weftrt/weft"
)

// The registry lists a tracking scheduler's live virtual threads
// (Options.TrackThreads). It holds each through a weak pointer, so a
// virtual thread that nothing else can reach (parked, and no waker left)
// is collected as it would be untracked; the entry goes at its end or
// with it (runtime.AddCleanup). Entries are sharded by ID, so that
// carriers starting threads on many CPUs do not share one lock.
type registry struct {
	shards [regShards]regShard
	// base is the time origin of the monotonic stamps (tracked.since).
	base time.Time
}

// regShards is the number of registry shards, a power of two.
const regShards = 16

type regShard struct {
	mu sync.Mutex
	m  map[uint64]*tracked
	_  cpu.CacheLinePad
}

// tracked is a virtual thread's registry entry. Its atomics are written
// by the carriers that run the thread and read by Threads.
type tracked struct {
	vt weak.Pointer[VThread]
	id uint64
	// cont is vt's record, which stays vt's until vt is done: weak, as
	// its frozen frames may point to vt.
	cont  weak.Pointer[weft.Cont]
	group *Group
	// created are the PCs of the call of Go, GoNamed or Group.Go.
	created []uintptr
	// carrier is the ID of the carrier running the thread, -1 if none.
	carrier atomic.Int32
	// since is when the thread last parked, in nanoseconds after
	// registry.base; 0 while it runs or is queued.
	since atomic.Int64
	// labels are the thread's pprof labels as it last mounted or parked.
	labels atomic.Pointer[byte]
	// pinned is the whole stack of the pinned park in progress, if any.
	pinned atomic.Pointer[[]uintptr]
}

// newRegistry returns the registry of s, a new scheduler, and counts s in
// profiling until s is collected: its carriers then call the profiles'
// hooks (profiling.go), which keep the registry's entries up to date.
func newRegistry(s *Scheduler) *registry {
	profiling.Add(1)
	runtime.AddCleanup(s, func(struct{}) { profiling.Add(-1) }, struct{}{})
	return emptyRegistry()
}

// emptyRegistry returns an empty registry.
func emptyRegistry() *registry {
	r := &registry{base: time.Now()}
	for i := range r.shards {
		r.shards[i].m = make(map[uint64]*tracked)
	}
	return r
}

// now returns the monotonic time since r.base, at least 1.
func (r *registry) now() int64 { return max(int64(time.Since(r.base)), 1) }

func (r *registry) shard(id uint64) *regShard { return &r.shards[id&(regShards-1)] }

// createdSkip is runtime.Callers' skip for the caller of Go: Callers,
// add, startFrom, start (or startFrom's caller) and Go.
const createdSkip = 5

// add registers vt, not yet published, at its start.
func (r *registry) add(vt *VThread) {
	pcs := make([]uintptr, 32)
	pcs = pcs[:runtime.Callers(createdSkip, pcs)]
	t := &tracked{vt: weak.Make(vt), id: vt.id, cont: weak.Make(vt.cont), group: vt.group, created: slices.Clip(pcs)}
	t.carrier.Store(-1)
	t.labels.Store((*byte)(vt.labels()))
	vt.rareLocked().track = t
	sh := r.shard(vt.id)
	sh.mu.Lock()
	sh.m[vt.id] = t
	sh.mu.Unlock()
	runtime.AddCleanup(vt, r.drop, vt.id)
}

// remove drops vt's entry at its end.
func (r *registry) remove(vt *VThread) { r.drop(vt.id) }

// drop deletes the entry of the thread with the given ID.
func (r *registry) drop(id uint64) {
	sh := r.shard(id)
	sh.mu.Lock()
	delete(sh.m, id)
	sh.mu.Unlock()
}

// entries returns the registry's entries, by ID.
func (r *registry) entries() []*tracked {
	var out []*tracked
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, t := range sh.m {
			out = append(out, t)
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b *tracked) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

// ThreadState is a virtual thread's state in a thread dump.
type ThreadState int

// A virtual thread's states in a thread dump.
const (
	// Running: mounted on a carrier.
	Running ThreadState = iota
	// Queued: runnable, waiting for a carrier.
	Queued
	// Parked: suspended in a park (Park, Join, a Chan, a Mutex, Sleep...).
	Parked
	// Pinned: parked while it could not be suspended, blocking its
	// carrier (a park inside pinning.Do or a cgo callback).
	Pinned
)

// String returns the state's name in lower case, as dumps print it.
func (st ThreadState) String() string {
	switch st {
	case Running:
		return "running"
	case Queued:
		return "queued"
	case Parked:
		return "parked"
	case Pinned:
		return "pinned"
	}
	return "unknown"
}

// ThreadInfo describes one virtual thread at the moment Threads read it.
type ThreadInfo struct {
	ID      uint64
	Name    string
	State   ThreadState
	Carrier int // the ID of the carrier running it, -1 if none
	// Labels are its pprof labels (pprof.Do, pprof.SetGoroutineLabels)
	// as it last mounted or parked.
	Labels map[string]string
	// Group is the Group it is a child of, or nil.
	Group *Group
	// ParkedSince is when it parked, for a parked or pinned thread.
	ParkedSince time.Time
	// CreatedBy are the PCs of the call stack that started it, from the
	// caller of Go, GoNamed or Group.Go outwards (runtime.CallersFrames
	// reads them).
	CreatedBy []uintptr
	// Stack are its frames, innermost first: of a parked or queued
	// thread, those frozen in its continuation, down to the body (none
	// for a thread not yet run); of a running one, its live frames down
	// to the body, from a traceback of every goroutine (File, Function
	// and Line; PC and Entry are 0); of a pinned one, its whole stack
	// where it blocked. A running thread's is empty if it moved on while
	// it was read (liveDump), or runs on a compensation carrier.
	Stack []runtime.Frame
}

// Tracking reports whether s keeps a registry of its virtual threads
// (Options.TrackThreads).
func (s *Scheduler) Tracking() bool {
	s.check("Tracking")
	return s.reg != nil
}

// Threads returns the scheduler's live virtual threads, by ID, each read
// as the iteration reaches it: a thread that ends meanwhile is left out.
// A scheduler that does not track threads (Options.TrackThreads) yields
// none: Live and State count them.
func (s *Scheduler) Threads() iter.Seq[ThreadInfo] {
	s.check("Threads")
	return func(yield func(ThreadInfo) bool) {
		r := s.reg
		if r == nil {
			return
		}
		d := &liveDump{s: s}
		for _, t := range r.entries() {
			info, ok := r.info(t, d)
			if ok && !yield(info) {
				return
			}
		}
	}
}

// Thread returns the live virtual thread with the given ID, and whether
// there is one, if s tracks threads.
func (s *Scheduler) Thread(id uint64) (ThreadInfo, bool) {
	s.check("Thread")
	r := s.reg
	if r == nil {
		return ThreadInfo{}, false
	}
	sh := r.shard(id)
	sh.mu.Lock()
	t := sh.m[id]
	sh.mu.Unlock()
	if t == nil {
		return ThreadInfo{}, false
	}
	return r.info(t, &liveDump{s: s})
}

// info reads t's thread, a running one's stack from d; false if it has
// ended or been collected.
func (r *registry) info(t *tracked, d *liveDump) (ThreadInfo, bool) {
	vt := t.vt.Value()
	if vt == nil {
		return ThreadInfo{}, false
	}
	st := vt.state.Load()
	info := ThreadInfo{ID: t.id, Name: vt.Name(), Carrier: int(t.carrier.Load()), Group: t.group, CreatedBy: t.created}
	info.Labels = decodeLabels(unsafe.Pointer(t.labels.Load()))
	switch st {
	case vtRunning:
		info.State = Running
		if p := t.pinned.Load(); p != nil {
			info.State = Pinned // between its unpark and its wake-up
		} else {
			info.Stack = d.stack(t, vt)
		}
	case vtQueued, vtParked:
		info.State = Parked
		if st == vtQueued {
			info.State, info.Carrier = Queued, -1
		}
		// The record is vt's until vt is done, and StackTrace reads it
		// only while it is suspended, holding off its next Run: a
		// carrier that takes a queued thread meanwhile waits for it.
		if c := t.cont.Value(); c != nil {
			info.Stack = c.StackTrace()
		}
	case vtPinned:
		info.State = Pinned
	default:
		return ThreadInfo{}, false
	}
	if info.State == Pinned {
		if p := t.pinned.Load(); p != nil {
			info.Stack = framesOf(*p)
		}
	}
	if info.State == Parked || info.State == Pinned {
		if at := t.since.Load(); at != 0 {
			info.ParkedSince = r.base.Add(time.Duration(at))
		}
	}
	if vt.state.Load() == vtDone {
		return ThreadInfo{}, false // the stack read may be another's
	}
	return info, true
}

// liveDump is one traceback of every goroutine, taken for the running
// threads of one read of the registry. It is taken when the read meets
// its first running thread, so a read with none running costs nothing.
type liveDump struct {
	s     *Scheduler
	taken bool
	text  string // runtime.Stack(all)
	// switches are the carriers' switch counts just before text.
	switches []uint32
}

// stack returns the live frames of vt, t's thread, read as running, or
// nil if they are not in the traceback. vt's carrier must have switched
// no thread since just before the traceback, and vt must still be
// running on it: then the carrier's thread in the traceback is vt. A
// compensation carrier is not listed, and its thread shows no stack.
func (d *liveDump) stack(t *tracked, vt *VThread) []runtime.Frame {
	id := int(t.carrier.Load())
	if id < 0 || id >= len(d.s.carriers) {
		return nil
	}
	if !d.taken {
		d.take()
	}
	c := d.s.carriers[id]
	if c.switches.Load() != d.switches[id] || int(t.carrier.Load()) != id || vt.state.Load() != vtRunning {
		return nil // vt moved on, or another thread runs on c
	}
	block, ok := heldStack(d.text, c.gid.Load())
	if !ok || block == "" {
		return nil
	}
	return threadFrames(block)
}

// take records the carriers' switch counts, then the traceback of every
// goroutine (allStacks), which stops the world.
func (d *liveDump) take() {
	d.taken = true
	for _, c := range d.s.carriers {
		d.switches = append(d.switches, c.switches.Load())
	}
	d.text, _ = allStacks() // a carrier cut off shows no stack
}

// framesOf returns the frames of the return PCs pcs, leaving out the
// engine's own (package weft's).
func framesOf(pcs []uintptr) []runtime.Frame {
	var out []runtime.Frame
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if !engineFrame(f.Function) {
			out = append(out, f)
		}
		if !more {
			return out
		}
	}
}

// enginePrefix is the prefix of the names of package weft's functions.
var enginePrefix = func() string {
	name := runtime.FuncForPC(reflectPC(weft.Innermost)).Name()
	return name[:len(name)-len("Innermost")]
}()

// engineFrame reports whether the function fn belongs to package weft.
func engineFrame(fn string) bool {
	return len(fn) > len(enginePrefix) && fn[:len(enginePrefix)] == enginePrefix
}

// CarrierState is one carrier in a State.
type CarrierState struct {
	ID     int
	Queued int  // virtual threads on its run queue
	Idle   bool // waiting for work
}

// State is a snapshot of a scheduler's carriers and counts.
type State struct {
	Carriers []CarrierState // the ordinary carriers
	// Compensation is how many compensation carriers run, standing in
	// for carriers blocked pinned (Blocked).
	Compensation int
	Blocked      int
	Global       int  // virtual threads on the global run queue
	Live         int  // virtual threads started and not finished
	Tracking     bool // Options.TrackThreads
	Closing      bool // Shutdown or Close has begun
}

// State returns a snapshot of s's carriers and counts, each read at a
// slightly different moment.
func (s *Scheduler) State() State {
	s.check("State")
	st := State{Blocked: int(s.blocked.Load()), Live: s.Live(), Tracking: s.reg != nil, Closing: s.closing.Load()}
	s.mu.Lock()
	st.Compensation = s.temp
	st.Global = len(s.global) - s.ghead
	idle := slices.Clone(s.idle)
	s.mu.Unlock()
	if d := s.det; d != nil {
		d.mu.Lock()
		st.Global += len(d.ready)
		d.mu.Unlock()
	}
	for _, c := range s.carriers {
		c.mu.Lock()
		n := len(c.queue) - c.head
		if q := c.queued.Load(); q != queuedNone && q != queuedInQueue {
			n++ // a thread in runnext
		}
		c.mu.Unlock()
		st.Carriers = append(st.Carriers, CarrierState{ID: c.id, Queued: n, Idle: slices.Contains(idle, c)})
	}
	return st
}
