package scheduler

import (
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// A carrier is held when the virtual thread it runs keeps it without
// parking. The thread computes, or blocks where the scheduler cannot
// see: time.Sleep, a Go channel, a sync.Mutex, a system call. The
// monitor notices it from the carrier's switch count: unchanged at
// heldLooks+1 looks in a row, while the carrier is not idle. It then
// starts a compensation carrier, which steals the held carrier's queued
// threads, and records a HeldEvent. The carrier's only part is the count
// it bumps at each run.

// lookEvery is how often the monitor looks at the carriers for held ones
// while any carrier runs a virtual thread.
const lookEvery = 5 * time.Millisecond

// heldLooks is how many look intervals in a row a carrier's switch count
// must stay the same for the carrier to be held. It then ran one virtual
// thread for at least heldLooks·lookEvery, 20 ms. Looks are counted, not
// time. So a pause of the whole process, such as a collection's stop,
// does not make every carrier look held.
const heldLooks = 4

// maxHeldEvents is how many HeldEvents a scheduler keeps: the latest.
const maxHeldEvents = 64

// maxHeldDump bounds the traceback of every goroutine that heldEvent
// takes. A carrier not found in a dump cut there counts as held, with no
// site. It ran one thread past the threshold, or its goroutine did not
// run at all.
const maxHeldDump = 64 << 20

// dumpEvery is how often at most the monitor takes the traceback of
// every goroutine (heldEvent). That traceback tells what a held
// carrier's thread does. maxDumpGoroutines is how many goroutines at
// most it takes it with. The traceback stops the world for a time that
// grows with the goroutines, tens of microseconds each. On the portable
// backend every parked virtual thread is one. A hold found sooner after
// the last, or with more goroutines, is taken without a look at its
// stack. Its event has no site, and a carrier waiting for the collector
// counts.
const (
	dumpEvery         = time.Second
	maxDumpGoroutines = 1000
)

// HeldCarrier is the Reason of every HeldEvent.
const HeldCarrier = "held carrier"

// HeldEvent is one row of Held: a virtual thread that held its carrier
// without parking past the monitor's threshold. See docs/design.md,
// "Fairness and liveness".
type HeldEvent struct {
	Reason string // HeldCarrier
	// Function is the innermost function of the held thread's stack
	// outside the Go standard library and weft's engine: the code that
	// blocked or computed. "" if the stack was not found.
	Function string
	// Computing says that the thread was running, not blocked, when the
	// monitor looked.
	Computing bool
	// Wait is the state of the goroutine running the thread, as the
	// runtime's traceback names it. It is "running" or "runnable" when
	// computing, else why it waits: "sleep", "chan receive",
	// "sync.Mutex.Lock", "IO wait", "syscall" and so on.
	Wait string
	// Stack is the traceback of that goroutine, where the thread was.
	Stack string
	// Start is when the monitor first saw the carrier without a switch:
	// the hold began up to one look earlier.
	Start time.Time
	// Duration is how long the carrier was held from Start. If
	// Released, it ends when the thread parked, yielded or ended; else
	// when Held was called.
	Duration time.Duration
	// Released says that the thread has let go of its carrier.
	Released bool
}

// Held returns the latest times virtual threads held their carriers
// without parking, up to 64, oldest first. Deterministic mode has no
// monitor and records none.
func (s *Scheduler) Held() []HeldEvent {
	s.check("Held")
	now := time.Now()
	s.heldMu.Lock()
	out := make([]HeldEvent, len(s.heldLog))
	for i, e := range s.heldLog {
		out[i] = *e
		if !e.Released {
			out[i].Duration = now.Sub(e.Start)
		}
	}
	s.heldMu.Unlock()
	return out
}

// Blocking runs f, which blocks its caller where the scheduler cannot
// see: a system call, a cgo call, a Go channel or lock. First it starts
// a compensation carrier for the calling virtual thread's carrier, up to
// Options.MaxCompensation. So the carrier's other virtual threads run
// meanwhile, without waiting for the monitor to find the carrier held.
// It plays the role of Java's ForkJoinPool.managedBlock. Called from a
// plain goroutine, or in deterministic mode (one carrier by design), it
// just calls f. f should not park on this package's primitives: the
// compensation carrier would run beside its carrier meanwhile.
func Blocking(f func()) {
	vt := Current()
	if vt == nil || vt.carrier == nil || vt.s.det != nil {
		f()
		return
	}
	s, c := vt.s, vt.carrier
	c.payOwed() // what vt queued here must not wait for the monitor
	if c.temp {
		c.spill() // nobody steals from a compensation carrier
	}
	c.compensated.Add(1)
	s.blocked.Add(1)
	s.startTemp()
	defer func() {
		s.blocked.Add(-1)
		c.compensated.Add(-1)
		s.wakeSurplusTemp()
	}()
	f()
}

// watch is the monitor's view of one carrier. Only the monitor touches
// it.
type watch struct {
	switches uint32     // the carrier's switch count at the last look
	same     int        // looks in a row that saw that count
	start    time.Time  // the first of those looks
	checked  bool       // the count was found not held (idle, or compensated)
	held     *HeldEvent // the event while the carrier is held
	// The carrier's OS thread, for locked carriers only. If sched, its
	// times running and waiting for a CPU (threadSched) at schedAt, the
	// first look without a switch.
	tid       int
	run, wait int64
	sched     bool
	schedAt   time.Time
}

// lookHeld is the monitor's look at the carriers for held ones. now is
// the time of the look.
func (s *Scheduler) lookHeld(now time.Time) {
	for _, c := range s.carriers {
		w := &c.watch
		sw := c.switches.Load()
		if sw != w.switches || c.compensated.Load() != 0 {
			s.release(w, now)
			*w = watch{switches: sw, start: now}
			continue
		}
		if w.held != nil {
			if s.isIdle(c) { // it ended, and nothing else ran since
				s.release(w, now)
				*w = watch{switches: sw, start: now}
			}
			continue
		}
		if w.same++; w.same == 1 {
			// A borrowed carrier's thread runs on the joiner's OS
			// thread, whose times the monitor does not know.
			if w.tid = int(c.tid.Load()); w.tid != 0 && !c.borrowed.Load() {
				w.run, w.wait, w.sched = threadSched(w.tid)
				w.schedAt = now
			}
		}
		if w.same < heldLooks || w.checked {
			continue
		}
		if w.sched && w.tid == int(c.tid.Load()) {
			run, wait, ok := threadSched(w.tid)
			if wall := int64(now.Sub(w.schedAt)); ok && 2*(wait-w.wait) > wall && 4*(run-w.run) < wall {
				// The carrier's thread waited for a CPU most of the
				// time and hardly ran. The OS held it, not its virtual
				// thread, which neither blocked nor computed. Look
				// again over the next intervals.
				w.same = 0
				continue
			}
		}
		w.checked = true // until the count moves
		if s.isIdle(c) {
			continue
		}
		var e *HeldEvent
		if now.Sub(s.lastDump) >= dumpEvery && runtime.NumGoroutine() <= maxDumpGoroutines {
			s.lastDump = now
			if e = c.heldEvent(w.start); e == nil {
				continue // not running a virtual thread, or waiting for the runtime
			}
		} else {
			e = &HeldEvent{Reason: HeldCarrier, Start: w.start}
		}
		w.held = e
		s.heldMu.Lock()
		if len(s.heldLog) == maxHeldEvents {
			copy(s.heldLog, s.heldLog[1:])
			s.heldLog = s.heldLog[:len(s.heldLog)-1]
		}
		s.heldLog = append(s.heldLog, e)
		s.heldMu.Unlock()
		s.holds.Add(1)
		s.startTemp()
	}
}

// release ends w's hold, if any, at now. Its compensation carrier may
// retire.
func (s *Scheduler) release(w *watch, now time.Time) {
	e := w.held
	if e == nil {
		return
	}
	s.heldMu.Lock()
	e.Duration = now.Sub(e.Start)
	e.Released = true
	s.heldMu.Unlock()
	s.holds.Add(-1)
	s.wakeSurplusTemp()
}

// releaseAll ends every hold, as the monitor exits.
func (s *Scheduler) releaseAll() {
	now := time.Now()
	for _, c := range s.carriers {
		s.release(&c.watch, now)
		c.watch.held = nil
	}
}

// isIdle reports whether c is on the idle list.
func (s *Scheduler) isIdle(c *carrier) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.idle {
		if o == c {
			return true
		}
	}
	return false
}

// anyBusy reports whether a carrier, not a compensation one, is off the
// idle list: running, or about to look for work.
func (s *Scheduler) anyBusy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, o := range s.idle {
		if !o.temp {
			n++
		}
	}
	return n < len(s.carriers)
}

// heldEvent returns the event for c, held since about start. The event
// has the stack of the goroutine running c's virtual thread. It returns
// nil if c is not running one. It stops the world to take every
// goroutine's stack, as runtime.Stack does: once per hold, never on a
// carrier's path.
func (c *carrier) heldEvent(start time.Time) *HeldEvent {
	dump, cut := allStacks()
	var stack string
	var ok bool
	if c.borrowed.Load() {
		stack, ok = borrowedStack(dump)
	} else {
		stack, ok = heldStack(dump, c.gid.Load())
	}
	if !ok && !cut {
		return nil
	}
	e := &HeldEvent{Reason: HeldCarrier, Start: start}
	if stack != "" {
		e.Stack = stack
		e.Wait = goroutineWait(stack)
		if runtimeWait(e.Wait) {
			return nil
		}
		e.Computing = e.Wait == "running" || e.Wait == "runnable"
		e.Function = siteFunction(stack)
	}
	return e
}

// allStacks returns runtime.Stack of every goroutine, up to maxHeldDump
// bytes; cut says it was cut there. It stops the world at least once.
func allStacks() (dump string, cut bool) {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= maxHeldDump {
			return string(buf[:n]), n >= len(buf)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// runtimeWait reports whether a goroutine's state (goroutineWait) is a
// wait for the runtime itself. That is a wait for the collector
// (runtime.GC, an assist), or on one of its semaphores: a stop of the
// world another goroutine asked for. Every goroutine that allocates
// waits for those too. Another carrier would only add to the
// contention, so such a carrier is not held.
func runtimeWait(wait string) bool {
	return wait == "semacquire" || strings.HasPrefix(wait, "GC ") ||
		strings.HasPrefix(wait, "wait for GC") || wait == "garbage collection"
}

// The frames that mark a carrier running a virtual thread, a goroutine
// with a virtual thread's frames on it, and a plain goroutine running a
// thread as a borrowed carrier, as a traceback names them ("name(").
// They are read from the binary, so that a copy of the module under
// another path finds them too.
var (
	runFrame     = tracebackName((*carrier).run)
	bodyFrame    = tracebackName(vthreadBody)
	outsideFrame = tracebackName((*Scheduler).runOutside)
)

// tracebackName returns how a traceback names a call of fn: its name in
// the runtime's tables and an opening parenthesis.
func tracebackName(fn any) string {
	return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name() + "("
}

// heldStack finds, in dump (runtime.Stack of every goroutine), the
// traceback of the goroutine running the virtual thread of the carrier
// whose goroutine is gid. ok is false if that carrier is not inside one:
// not in run, or in run outside the thread's frames. On the
// stack-copying backend the thread's frames are on the carrier's
// goroutine. On the portable backend they are on a body goroutine that
// is not switched out (not "coroutine"). If the thread never moved, the
// carrier's goroutine created it. heldStack takes the one such, or the
// one the carrier created; else stack is "".
func heldStack(dump string, gid uint64) (stack string, ok bool) {
	blocks := strings.Split(dump, "\n\n")
	head := "goroutine " + strconv.FormatUint(gid, 10) + " ["
	var carrier string
	for _, b := range blocks {
		if strings.HasPrefix(b, head) {
			carrier = b
			break
		}
	}
	if !strings.Contains(carrier, runFrame) {
		return "", false
	}
	if strings.Contains(carrier, bodyFrame) {
		return carrier, true
	}
	if goroutineWait(carrier) != "coroutine" {
		// In run, outside the thread's frames (stack-copying), or not
		// switched into its body goroutine (portable). The carrier's
		// own code ran late, not a thread.
		return "", false
	}
	var bodies []string
	for _, b := range blocks {
		if strings.Contains(b, bodyFrame) && goroutineWait(b) != "coroutine" {
			bodies = append(bodies, b)
		}
	}
	if len(bodies) == 1 {
		return bodies[0], true
	}
	created := " in goroutine " + strconv.FormatUint(gid, 10) + "\n"
	for _, b := range bodies {
		if strings.Contains(b+"\n", created) {
			return b, true
		}
	}
	return "", true
}

// borrowedStack returns the stack of the plain goroutine running a
// virtual thread as a borrowed carrier (runOutside). ok is always true:
// a borrowed carrier runs a thread until it gives the carrier back. The
// stack is "" unless exactly one goroutine runs one so.
func borrowedStack(dump string) (stack string, ok bool) {
	n := 0
	for _, b := range strings.Split(dump, "\n\n") {
		if strings.Contains(b, outsideFrame) && strings.Contains(b, bodyFrame) {
			stack = b
			n++
		}
	}
	if n != 1 {
		return "", true
	}
	return stack, true
}

// goroutineWait returns the state in the header of a goroutine's
// traceback ("goroutine 7 [chan receive, 2 minutes]:"): "chan receive".
func goroutineWait(stack string) string {
	i := strings.IndexByte(stack, '[')
	j := strings.IndexAny(stack, ",]")
	if i < 0 || j < i {
		return ""
	}
	return stack[i+1 : j]
}

// siteFunction returns the innermost function of a goroutine's
// traceback outside the Go standard library and weft's engine: the root
// package, arch and internal. It returns "" if there is none.
func siteFunction(stack string) string {
	for _, line := range strings.Split(stack, "\n")[1:] {
		if line == "" || line[0] == '\t' || strings.HasPrefix(line, "created by ") {
			continue
		}
		if name := callName(line); !isEngineOrStd(name) {
			return name
		}
	}
	return ""
}

// callName returns the function of a call line in a traceback
// ("pkg.(*T).m(0xc000012345, ...)"): "pkg.(*T).m".
func callName(line string) string {
	if i := strings.LastIndexByte(line, '('); i > 0 {
		return line[:i]
	}
	return line
}

// threadFrames returns the frames of a goroutine's traceback (one block
// of runtime.Stack) from the innermost down to vthreadBody's, or nil if
// vthreadBody is not on it: the running virtual thread's own frames.
// Package weft's are left out, as framesOf does. A traceback names
// functions, files and lines only, so the frames' PCs are 0.
func threadFrames(stack string) []runtime.Frame {
	lines := strings.Split(stack, "\n")
	var out []runtime.Frame
	for i := 1; i+1 < len(lines); i += 2 {
		call, at := lines[i], lines[i+1]
		if strings.HasPrefix(call, "created by ") || !strings.HasPrefix(at, "\t") {
			return nil
		}
		f := runtime.Frame{Function: callName(call)}
		at = at[1:]
		if j := strings.LastIndex(at, " +0x"); j >= 0 {
			at = at[:j]
		}
		if j := strings.LastIndexByte(at, ':'); j >= 0 {
			f.File = at[:j]
			f.Line, _ = strconv.Atoi(at[j+1:])
		}
		if !engineFrame(f.Function) {
			out = append(out, f)
		}
		if strings.HasPrefix(call, bodyFrame) {
			return out
		}
	}
	return nil
}

// isEngineOrStd reports whether the function name is in the Go standard
// library or in weft's engine.
func isEngineOrStd(name string) bool {
	for _, p := range []string{"github.com/weftrt/weft.", "github.com/weftrt/weft/arch.", "github.com/weftrt/weft/internal/"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	pkg := name
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		if j := strings.IndexByte(pkg[i:], '.'); j >= 0 {
			pkg = pkg[:i+j]
		}
	} else if j := strings.IndexByte(pkg, '.'); j >= 0 {
		pkg = pkg[:j]
	}
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".") && pkg != "main"
}

// goroutineID returns the calling goroutine's ID, from the header of its
// traceback ("goroutine 7 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := string(buf[:runtime.Stack(buf[:], false)])
	b = strings.TrimPrefix(b, "goroutine ")
	if i := strings.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseUint(b[:i], 10, 64)
		return id
	}
	return 0
}
