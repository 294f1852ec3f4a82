package scheduler

import (
	"context"
	"math/rand/v2"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/pinning"
)

// The scheduler's profiles: pinned parks and yields (PinProfile), parks
// (ParkProfile), and the mount records that give CPU profiles whole
// stacks (RecordMounts). Package vtprof writes them in pprof's formats.
// A carrier calls profMount and profPark only while profiling is above
// zero: off, each costs a load and a branch.

// profiling counts the schedulers that track threads (until collected)
// or whose park profile is on, plus one while mounts are recorded. A
// carrier's mount and park test it alone, one load for every profile.
var profiling atomic.Int32

// clockBase is the origin of the monotonic stamps of the park profile.
var clockBase = time.Now()

// mono returns the monotonic time since clockBase, at least 1.
func mono() int64 { return max(int64(time.Since(clockBase)), 1) }

// profState is a scheduler's profiles.
type profState struct {
	// parkRate is the park profile's rate in nanoseconds, 0 when off.
	parkRate atomic.Int64
	// pinThreshold is 0 for the default (DefaultPinThreshold), -1 when
	// off, and otherwise the threshold plus one nanosecond.
	pinThreshold atomic.Int64

	mu    sync.Mutex
	parks map[string]*BlockRecord
	pins  map[string]*PinRecord
}

// DefaultPinThreshold is the blocked time from which a pinned park is
// recorded in PinProfile unless SetPinThreshold says otherwise: JFR's
// default for jdk.VirtualThreadPinned.
const DefaultPinThreshold = 20 * time.Millisecond

// BlockRecord is one call stack of the park profile: how many parks it
// stands for, how long they lasted in all, and how much of that the
// threads, once woken, waited for a carrier.
type BlockRecord struct {
	Count int64
	Nanos int64
	// WakeNanos is the time from the wake-up (an Unpark, a Chan hand-off,
	// a timer) to the next mount, in all. A park whose thread had its
	// permit already counts whole.
	WakeNanos int64
	Stack     []runtime.Frame // innermost first, down to the virtual thread's body
}

// PinRecord is one row of the pinning profile: the parks or yields that
// could not suspend their virtual thread at one call stack for one reason.
type PinRecord struct {
	Reason pinning.Reason
	// Function is the function whose frame pinned (PinSite.Function).
	Function string
	// Park is true for pinned parks, which block their carrier, and
	// false for pinned yields.
	Park  bool
	Count int64
	// Nanos is the time the carriers were blocked, in all.
	Nanos int64
	Stack []runtime.Frame // innermost first
}

// SetParkProfileRate sets how the park profile samples, with the
// semantics of runtime.SetBlockProfileRate. A park that lasted rate
// nanoseconds or more is recorded. A shorter one of d nanoseconds is
// recorded with probability d/rate, counted as rate/d parks. Rate 1
// records every park, and 0, the default, turns the profile off.
func (s *Scheduler) SetParkProfileRate(rate int) {
	s.check("SetParkProfileRate")
	old := s.prof.parkRate.Swap(int64(max(rate, 0)))
	switch {
	case old == 0 && rate > 0:
		profiling.Add(1)
	case old != 0 && rate <= 0:
		profiling.Add(-1)
	}
}

// ParkProfileRate returns the park profile's rate, 0 when it is off.
func (s *Scheduler) ParkProfileRate() int { return int(s.prof.parkRate.Load()) }

// SetPinThreshold sets the blocked time from which a pinned park or
// yield is recorded in the pinning profile. 0 records every one, a
// negative d none. The default is DefaultPinThreshold.
func (s *Scheduler) SetPinThreshold(d time.Duration) {
	s.check("SetPinThreshold")
	if d < 0 {
		s.prof.pinThreshold.Store(-1)
		return
	}
	s.prof.pinThreshold.Store(int64(d) + 1)
}

// PinThreshold returns the pinning profile's threshold, negative when it
// records nothing.
func (s *Scheduler) PinThreshold() time.Duration {
	switch t := s.prof.pinThreshold.Load(); {
	case t == 0:
		return DefaultPinThreshold
	case t < 0:
		return -1
	default:
		return time.Duration(t - 1)
	}
}

// ParkProfile returns the park profile's records, most time first.
func (s *Scheduler) ParkProfile() []BlockRecord {
	s.check("ParkProfile")
	s.prof.mu.Lock()
	out := make([]BlockRecord, 0, len(s.prof.parks))
	for _, r := range s.prof.parks {
		out = append(out, *r)
	}
	s.prof.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Nanos > out[j].Nanos })
	return out
}

// PinProfile returns the pinning profile's records, most time first,
// then most frequent.
func (s *Scheduler) PinProfile() []PinRecord {
	s.check("PinProfile")
	s.prof.mu.Lock()
	out := make([]PinRecord, 0, len(s.prof.pins))
	for _, r := range s.prof.pins {
		out = append(out, *r)
	}
	s.prof.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Nanos != out[j].Nanos {
			return out[i].Nanos > out[j].Nanos
		}
		return out[i].Count > out[j].Count
	})
	return out
}

// profMount is carrier c's part of the profiles as it mounts vt, whose
// labels are own. It returns the labels the goroutine is to have while
// vt runs: own, or own with the labels that name the mount
// (RecordMounts).
func (s *Scheduler) profMount(vt *VThread, c *carrier, own unsafe.Pointer) unsafe.Pointer {
	if r := s.reg; r != nil {
		t := vt.rare.Load().track
		t.carrier.Store(int32(c.id))
		t.since.Store(0)
		t.labels.Store((*byte)(own))
	}
	if rate := s.prof.parkRate.Load(); rate != 0 {
		if r := vt.rare.Load(); r != nil && r.parkedAt != 0 {
			now := mono()
			d, wake := now-r.parkedAt, now-r.parkedAt
			if r.wokenAt != 0 {
				wake = now - r.wokenAt
				r.wokenAt = 0
			}
			r.parkedAt = 0
			s.sampleParked(vt, d, wake, rate)
		}
	}
	if m := mounts.Load(); m != nil {
		return m.mount(vt, own)
	}
	return own
}

// profPark is carrier c's part of the profiles as vt parks.
func (s *Scheduler) profPark(vt *VThread) {
	if r := s.reg; r != nil {
		t := vt.rare.Load().track
		t.carrier.Store(-1)
		t.since.Store(r.now())
		t.labels.Store((*byte)(vt.labels()))
	}
	if s.prof.parkRate.Load() != 0 {
		r := vt.rare.Load()
		if r == nil {
			vt.joinMu.Lock()
			r = vt.rareLocked()
			vt.joinMu.Unlock()
		}
		r.parkedAt = mono()
	}
}

// profYield records that vt, which has yielded, runs on no carrier. A
// dump must not take the stack of the carrier it left for vt's until it
// mounts again.
func (s *Scheduler) profYield(vt *VThread) {
	if s.reg != nil {
		vt.rare.Load().track.carrier.Store(-1)
	}
}

// profWake stamps the wake-up of vt for the park profile. vt was parked,
// and its caller has just queued it.
func (s *Scheduler) profWake(vt *VThread) {
	if s.prof.parkRate.Load() != 0 {
		if r := vt.rare.Load(); r != nil && r.parkedAt != 0 {
			r.wokenAt = mono()
		}
	}
}

// sampleParked records a park of d nanoseconds if the sampling picks it.
// wake of them came after its wake-up. vt, about to be resumed, ends the
// park.
func (s *Scheduler) sampleParked(vt *VThread, d, wake, rate int64) {
	weight := int64(1)
	if d < rate {
		if rand.Int64N(rate) >= d {
			return
		}
		weight = rate / max(d, 1)
	}
	stack := vt.cont.StackTrace()
	key := framesKey(stack)
	s.prof.mu.Lock()
	if s.prof.parks == nil {
		s.prof.parks = make(map[string]*BlockRecord)
	}
	rec := s.prof.parks[key]
	if rec == nil {
		rec = &BlockRecord{Stack: stack}
		s.prof.parks[key] = rec
	}
	rec.Count += weight
	rec.Nanos += d * weight
	rec.WakeNanos += wake * weight
	s.prof.mu.Unlock()
}

// framesKey returns a map key for the call stack frames.
func framesKey(frames []runtime.Frame) string {
	b := make([]byte, 0, 8*len(frames))
	for _, f := range frames {
		b = strconv.AppendUint(b, uint64(f.PC), 16)
		b = append(b, ' ')
	}
	return string(b)
}

// pinBegin is called by a pinned park of vt before it blocks its
// carrier. It returns the time it began. It also returns the thread's
// whole stack if its registry entry shows it; pinEnd then clears it.
func (s *Scheduler) pinBegin(vt *VThread) (start int64, stack []uintptr) {
	if s.prof.pinThreshold.Load() < 0 && s.reg == nil {
		return 0, nil
	}
	if r := s.reg; r != nil {
		t := vt.rare.Load().track
		stack = wholeStack(vt, 4) // from parkPinned's caller
		t.pinned.Store(&stack)
		t.since.Store(r.now())
	}
	return mono(), stack
}

// pinEnd records a pinned park (park) or yield of vt in the pinning
// profile, if it lasted the threshold. It began at start (pinBegin).
func (s *Scheduler) pinEnd(vt *VThread, perr *pinning.Error, park bool, start int64, stack []uintptr) {
	if s.reg != nil && park {
		t := vt.rare.Load().track
		t.pinned.Store(nil)
		t.since.Store(0)
	}
	th := s.prof.pinThreshold.Load()
	if th < 0 || start == 0 {
		return
	}
	d := mono() - start
	if th == 0 {
		th = int64(DefaultPinThreshold)
	} else {
		th--
	}
	if d < th {
		return
	}
	if stack == nil {
		skip := 3 // from Yield
		if park {
			skip = 4 // from parkPinned's caller
		}
		stack = wholeStack(vt, skip)
	}
	frames := framesOf(stack)
	key := strconv.Itoa(int(perr.Reason)) + strconv.FormatBool(park) + framesKey(frames)
	s.prof.mu.Lock()
	if s.prof.pins == nil {
		s.prof.pins = make(map[string]*PinRecord)
	}
	rec := s.prof.pins[key]
	if rec == nil {
		rec = &PinRecord{Reason: perr.Reason, Function: perr.Frame.Function, Park: park, Stack: frames}
		s.prof.pins[key] = rec
	}
	rec.Count++
	rec.Nanos += d
	s.prof.mu.Unlock()
}

// pinStart returns the start time of a pinned yield, 0 if the pinning
// profile is off.
func (s *Scheduler) pinStart() int64 {
	if s.prof.pinThreshold.Load() < 0 {
		return 0
	}
	return mono()
}

// wholeStack returns the return PCs of the calling virtual thread vt's
// whole stack. It starts at the frame runtime.Callers' skip names (1 is
// wholeStack's) and ends at its body. The live frames down to the return
// barrier come first, then those frozen below it.
func wholeStack(vt *VThread, skip int) []uintptr {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(skip, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	for i, pc := range pcs {
		if weft.IsBarrierPC(pc) {
			if weft.Innermost() == vt.cont {
				return vt.cont.FrozenPCs(pcs[:i])
			}
			return pcs[:i]
		}
		if pc-1 >= bodyEntry && pc-1 < bodyEnd {
			return pcs[:i+1]
		}
	}
	return pcs
}

// bodyEntry and bodyEnd bound vthreadBody's code: a stack walk that
// reaches it has reached the bottom of a virtual thread.
var bodyEntry, bodyEnd = func() (uintptr, uintptr) {
	f := runtime.FuncForPC(reflectPC(vthreadBody))
	entry := f.Entry()
	end := entry
	for runtime.FuncForPC(end) == f {
		end++
	}
	return entry, end
}()

// reflectPC returns the entry PC of the function value f.
func reflectPC(f any) uintptr { return reflect.ValueOf(f).Pointer() }

// A whole-stack CPU profile needs, for each sample taken while a virtual
// thread ran, the frames frozen under its return barrier. The runtime's
// unwinder stops there. While mounts are recorded, each mount of a
// virtual thread gets labels. They name the thread (LabelThread,
// LabelName) and the frames frozen when it mounted (LabelMount). Package
// vtprof stitches those frames under each sample's barrier frame after
// the profile stops. Threads that mount with the same frozen frames
// share one record. So the records grow with the distinct stacks, not
// with the mounts.

// The labels that a recorded mount adds to the virtual thread's own.
const (
	// LabelThread's value is the virtual thread's ID.
	LabelThread = "vthread"
	// LabelName's value is the virtual thread's name, if it has one.
	LabelName = "vthread.name"
	// LabelMount's value is the key, in the map that RecordMounts' stop
	// function returns, of the frames frozen as the thread mounted.
	LabelMount = "weft.mount"
)

// mounts is the recorder while mounts are recorded.
var mounts atomic.Pointer[mountRecorder]

type mountRecorder struct {
	mu sync.Mutex
	// keys maps frozen frames, as a string of their PCs' bytes, to their
	// key in frozen.
	keys   map[string]string
	frozen map[string][]uintptr
	last   map[*VThread]lastMount
}

// lastMount is a virtual thread's last recorded mount, which its next one
// reuses if nothing changed (a yield loop).
type lastMount struct {
	own, set unsafe.Pointer
	frozen   []uintptr
}

// RecordMounts records every mount of a virtual thread, of any
// scheduler, until the function it returns is called. That function
// returns the frames that were frozen in the threads' continuations as
// they mounted, by key (LabelMount). They are return PCs, innermost
// first (weft.Cont.FrozenPCs). A mount thaws the innermost of them. The
// rest stay under the return barrier until the frames above it return.
// RecordMounts reports false, and records nothing, if mounts are already
// being recorded. While they are, each mount of a virtual thread costs a
// walk of its frozen frames. When they changed since its last mount, it
// also costs a new label set. A virtual thread may replace its labels
// rather than add to them: pprof.SetGoroutineLabels with a context that
// did not come from its own. It then drops the mount's labels until it
// next parks.
func RecordMounts() (stop func() map[string][]uintptr, ok bool) {
	m := &mountRecorder{keys: make(map[string]string), frozen: make(map[string][]uintptr), last: make(map[*VThread]lastMount)}
	if !mounts.CompareAndSwap(nil, m) {
		return nil, false
	}
	profiling.Add(1)
	var once sync.Once
	return func() map[string][]uintptr {
		once.Do(func() {
			mounts.Store(nil)
			profiling.Add(-1)
		})
		m.mu.Lock()
		defer m.mu.Unlock()
		m.last = nil // the threads are the program's again
		return m.frozen
	}, true
}

// mount records vt's mount, whose own labels are own, and returns the
// labels that name it, which the calling carrier now has.
func (m *mountRecorder) mount(vt *VThread, own unsafe.Pointer) unsafe.Pointer {
	frozen := vt.cont.FrozenPCs(nil)
	m.mu.Lock()
	if m.last == nil { // stopped
		m.mu.Unlock()
		return own
	}
	if l, ok := m.last[vt]; ok && l.own == own && slices.Equal(l.frozen, frozen) {
		m.mu.Unlock()
		return l.set
	}
	content := unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(frozen))), len(frozen)*int(unsafe.Sizeof(uintptr(0))))
	key, ok := m.keys[content]
	if !ok {
		key = strconv.Itoa(len(m.keys) + 1)
		m.keys[strings.Clone(content)] = key
		m.frozen[key] = frozen
	}
	m.mu.Unlock()
	var pairs []string
	for k, v := range decodeLabels(own) {
		if k != LabelThread && k != LabelName && k != LabelMount {
			pairs = append(pairs, k, v)
		}
	}
	pairs = append(pairs, LabelThread, strconv.FormatUint(vt.id, 10), LabelMount, key)
	if name := vt.Name(); name != "" {
		pairs = append(pairs, LabelName, name)
	}
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(pairs...)))
	set := profLabel()
	m.mu.Lock()
	if m.last != nil {
		m.last[vt] = lastMount{own: own, set: set, frozen: frozen}
	}
	m.mu.Unlock()
	return set
}

// labelSet mirrors runtime/pprof's labelMap (internal/runtime/pprof/label
// Set): a list of key-value pairs. A goroutine's labels point to one
// since Go 1.24. TestDecodeLabels fails if the two diverge.
type labelSet struct {
	list []struct{ key, value string }
}

// decodeLabels returns the labels l, a goroutine's (profLabel), as a
// map. It returns nil if there are none.
func decodeLabels(l unsafe.Pointer) map[string]string {
	if l == nil {
		return nil
	}
	set := (*labelSet)(l)
	if len(set.list) == 0 {
		return nil
	}
	out := make(map[string]string, len(set.list))
	for _, kv := range set.list {
		out[kv.key] = kv.value
	}
	return out
}
