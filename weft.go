// Package weft is the engine beneath package continuation: the continuation
// record, its state machine, the yield (freeze) and resume (thaw) paths, and
// backend selection.
//
// Most programs want package continuation, which wraps this engine in the
// public API and adds the generators built on it. This package is exported
// so that other APIs (a scheduler, a profiler) can be built on the same
// engine and so that tools can ask which backend is in use.
//
// Two backends share one contract:
//
//   - portable: each continuation's body runs on its own goroutine, and
//     Run and Yield switch between goroutines with the runtime's coroutine
//     switch, the one iter.Pull uses. It runs everywhere.
//   - stack-copying: Yield freezes the body's frames into heap arrays and
//     Run thaws them onto the calling goroutine. It is the default on
//     linux/amd64 where its start-up self-check passes; Backend says which
//     backend runs and why.
package weft

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/weftrt/weft/internal/gls"
	"github.com/weftrt/weft/internal/proflabel"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// Sentinel errors. Misuse panics with an error that wraps one of these, so a
// recovered value can be checked with errors.Is.
var (
	// ErrDone: Run of a continuation whose body has returned, panicked or
	// called runtime.Goexit.
	ErrDone = errors.New("continuation is done")
	// ErrMounted: Run of a continuation that is already mounted, either
	// running (a re-entrant Run, or a concurrent Run from another goroutine
	// that lost the race) or suspended inside an enclosing continuation.
	ErrMounted = errors.New("continuation is mounted")
	// ErrNotInScope: Yield or Current with a nil scope, or Yield with no
	// continuation of that scope mounted on the calling goroutine.
	ErrNotInScope = errors.New("no continuation of that scope is mounted on this goroutine")
	// ErrNotDone: Reset of a continuation whose body has not ended.
	ErrNotDone = errors.New("continuation has not ended")
)

// state is a continuation's life-cycle state.
type state int32

const (
	stNew        state = iota // created, body not started
	stSuspended               // yielded to its own scope; may be Run
	stMounted                 // running, or suspended inside an enclosing continuation
	stTracing                 // suspended, and StackTrace is reading its frames
	stCancelling              // abandoned while suspended; its goroutine is unwinding
	stDone                    // body returned, panicked or exited
)

// Stats counts what a continuation has done. Counters only grow.
type Stats struct {
	// Runs is the number of Run calls that mounted the continuation. Being
	// resumed as part of an enclosing continuation does not count.
	Runs uint64
	// Yields is the number of times the continuation was suspended, by a
	// yield to its own scope or to an enclosing one.
	Yields uint64
	// Pinned is the number of yields that were pinned and did not suspend,
	// counted on the continuation whose scope the yield named, before its
	// onPinned handler runs.
	Pinned uint64
	// FramesFrozen and BytesFrozen count the frames and stack bytes copied
	// to the heap by yields; FramesThawed and BytesThawed count those copied
	// back by resumes. A yield to an enclosing scope that an enclosing
	// continuation's pinned frame refused has still copied the frames of
	// the continuations inside it, and thawed them back: both count them.
	// A resume also copies back the arguments of each record's outermost
	// frame. Those words lie at the bottom of its caller's frame; the
	// record carries them, and BytesFrozen does not count them. So
	// BytesThawed may exceed BytesFrozen by those words.
	// All four stay zero on the portable backend, which does not copy
	// stacks.
	FramesFrozen, BytesFrozen uint64
	FramesThawed, BytesThawed uint64
	// Unwinds counts the panics and runtime.Goexit calls that left the
	// thawed frames while frames still frozen had deferred calls pending,
	// and were carried on into them (the stack-copying backend's return
	// barrier; see docs/design.md).
	Unwinds uint64
	// Templated counts the yields whose frames were captured by the
	// stack-copying backend's fast path: a capture template, made by the
	// last capture of the same call chain (docs/design.md). A region
	// with stack objects (locals whose address is taken, closures and
	// deferred closures kept on the stack) or with a defer record takes
	// the general path, which costs more.
	Templated uint64
}

// Cont is the engine's record of one continuation. Package continuation
// wraps it; use that package unless you are building a new API on the
// engine.
type Cont struct {
	contHead

	// stack is the stack-copying backend's state: the frozen frames and how
	// to thaw them. Its body is the continuation's on either backend.
	// Once the body has ended it holds only what a Reset keeps
	// (stackState.finished).
	stack stackState
}

// contHead is the part of a Cont that Reset starts afresh, in one
// assignment: everything but the backend's state.
type contHead struct {
	// local is the goroutine-local record (package gls) that maps the
	// goroutine running the body to this record. It must stay the first
	// field: contOf recovers the record from its address.
	local gls.Local
	scope *scope.Scope
	state atomic.Int32
	// parentResolved: parentC is known (parent).
	parentResolved bool
	// reused: the record has been Reset, and is likely to be again, so
	// its body's end keeps the stack chunk's arrays (stackState.finished).
	reused bool
	// counted: the record is a countedCont, whose counters follow it
	// (NewCont); NewUncountedCont's records have none.
	counted bool
	// armed: Handler.Abandonable has run since NewCont or Reset.
	armed bool

	// owner is the API-level handle of the continuation while it is
	// mounted, and nil otherwise, so that a suspended continuation's body
	// goroutine does not keep the handle reachable.
	owner any

	// handler is the owner package's (SetHandler).
	handler *Handler
	// parentC is the continuation whose body called Run (nil if a plain
	// goroutine called it), once parentResolved. The stack-copying
	// backend knows it at every mount; the portable backend looks it up
	// from the calling goroutine (portableState.callerG) when asked.
	parentC *Cont

	// target is the continuation whose scope the last yield named: this
	// one, or an enclosing one.
	target *Cont
	// child is the nested continuation suspended together with this one,
	// while this one is suspended by a yield to an enclosing scope.
	child *Cont

	// pt is the portable backend's state, from the first Run.
	pt *portableState
}

// counters are a continuation's Stats. They live after the record, in a
// countedCont, and only there: a virtual thread's record, which a parked
// virtual thread keeps, goes without them (NewUncountedCont).
type counters struct {
	runs, yields, pinned      atomic.Uint64
	framesFrozen, bytesFrozen atomic.Uint64
	framesThawed, bytesThawed atomic.Uint64
	unwinds, templated        atomic.Uint64
}

// countedCont is what NewCont allocates: the record, its counters and its
// body's profiler labels, in the 288-byte size class (TestContSize).
type countedCont struct {
	Cont
	n counters

	// labels are the body's pprof labels (labels.go). At the record's
	// creation they are those of the goroutine that created it. On the
	// stack-copying backend they are the body's own while it is
	// suspended; mountLabels puts them in the g of Run's goroutine, and
	// unmountLabels takes them back. On the portable backend they are nil
	// once the body goroutine has started with them. They are nil when
	// the body has none, and once it has ended.
	labels unsafe.Pointer
	// outer are the labels of the goroutine that mounted the record, put
	// back when it is unmounted. They are set while mounted, and kept
	// after only while they are the body's too.
	outer unsafe.Pointer
	// leaveLabels: c's executor gives its bodies their labels, as the
	// scheduler does for virtual threads (LeaveLabels); labels stays nil.
	leaveLabels bool
}

// counters returns c's counters, or nil if c does not count.
func (c *Cont) counters() *counters {
	if !c.counted {
		return nil
	}
	return &(*countedCont)(unsafe.Pointer(c)).n
}

// dropLabels forgets the labels c's body had, and those of the goroutine
// that last ran it, once it has ended.
func (c *Cont) dropLabels() {
	if !c.counted {
		return
	}
	cc := (*countedCont)(unsafe.Pointer(c))
	if cc.labels != nil {
		cc.labels = nil
	}
	if cc.outer != nil {
		cc.outer = nil
	}
}

// LeaveLabels makes c's body run under the pprof labels of whichever
// goroutine calls Run, and leave the labels it sets on that goroutine. It
// is for an executor that gives its bodies labels itself, as the
// scheduler gives each virtual thread its own. Call it before the first
// Run; it holds across Reset. It holds on both backends: the portable one
// hands labels between Run's goroutine and the body's at each switch.
//
// By default a record from NewCont carries its body's labels, as a
// goroutine has its own (labels.go). NewUncountedCont's records always
// leave them.
func (c *Cont) LeaveLabels() {
	if c.counted {
		cc := (*countedCont)(unsafe.Pointer(c))
		cc.leaveLabels = true
		cc.labels = nil
	}
}

// contOf returns the continuation record whose local l is.
func contOf(l *gls.Local) *Cont { return (*Cont)(unsafe.Pointer(l)) }

// contOf needs local at offset 0: this fails to compile otherwise.
var _ [0]struct{} = [unsafe.Offsetof(Cont{}.local)]struct{}{}

// NewCont returns a continuation record that runs body delimited by s,
// with counters that Stats reports, and with profiler labels of its own
// (LeaveLabels). Nothing runs until the first Run.
func NewCont(s *scope.Scope, body func()) *Cont {
	checkNew("weft.NewCont", s, body)
	cc := &countedCont{Cont: Cont{contHead: contHead{scope: s, counted: true}}, labels: proflabel.Get()}
	cc.stack.body = body
	return &cc.Cont
}

// NewUncountedCont is NewCont without the counters: a 192-byte
// allocation per record instead of 288, for an executor that
// keeps many suspended continuations and reports no Stats of its own. The
// record's Stats are always zero, and it stays uncounted across Reset.
// Its body does not carry profiler labels of its own either
// (LeaveLabels). On the stack-copying backend it runs under the labels of
// the goroutine that calls Run, and leaves the labels it sets there. The
// executor must save and restore them around each Run, as the scheduler
// does.
func NewUncountedCont(s *scope.Scope, body func()) *Cont {
	checkNew("weft.NewUncountedCont", s, body)
	c := &Cont{contHead: contHead{scope: s}}
	c.stack.body = body
	return c
}

// checkNew panics if NewCont or NewUncountedCont (fn) was given a nil
// scope or body.
func checkNew(fn string, s *scope.Scope, body func()) {
	if s == nil {
		panic(fn + ": nil scope (create one with scope.New)")
	}
	if body == nil {
		panic(fn + ": nil body")
	}
}

// Reset makes c, whose body has ended, a new continuation that runs body
// delimited by s. It is what NewCont(s, body) or NewUncountedCont,
// whichever made c, would make, in c's record. An executor that starts
// many short continuations reuses the records of the finished ones. The
// counters start again from zero. A record reset once keeps, when its body
// ends, the arrays its frames were frozen into (up to 2 KiB) and its
// return-barrier closure, for the next body. It also keeps its body
// function, and what that closure refers to, until the next Reset.
//
// The caller must hold c exclusively. c's old identity ends at Reset:
// nothing may use c as the continuation it was (Run, Stats, Owner) after
// it. Reset panics with an error wrapping ErrNotDone if c has not ended.
// A new, suspended or mounted continuation has not ended, nor one whose
// body is still unwinding after an abandonment. Reset panics as NewCont
// does if s or body is nil.
func (c *Cont) Reset(s *scope.Scope, body func()) {
	if s == nil {
		panic("weft.Cont.Reset: nil scope (create one with scope.New)")
	}
	if body == nil {
		panic("weft.Cont.Reset: nil body")
	}
	if st := state(c.state.Load()); st != stDone {
		panic(fmt.Errorf("weft.Cont.Reset on %v: %w: only a continuation whose body has returned, panicked or exited can be reset", c.scope, ErrNotDone))
	}
	// The body's end (finish) left in c.stack only what a reset keeps:
	// the chunk's emptied arrays and, for a record reset
	// before, the body. contHead starts afresh field by field, each
	// pointer only if set. A struct assignment would run the collector's
	// bulk write barrier over every pointer slot. TestResetClearsHead
	// fails if a field is added and not cleared here.
	c.local = gls.Local{}
	if c.scope != s { // an executor resets its records to its one scope
		c.scope = s
	}
	c.state.Store(int32(stNew))
	c.parentResolved, c.reused, c.armed = false, true, false
	c.dropLinks() // finish did; a Reset must not rely on it
	if c.handler != nil {
		c.handler = nil
	}
	if c.pt != nil {
		c.pt = nil
	}
	if n := c.counters(); n != nil {
		*n = counters{}
	}
	if c.counted { // a virtual thread's record is not
		c.dropLabels() // finish did; as dropLinks
		c.createLabels()
	}
	if !sameFunc(c.stack.body, body) { // kept by finish: likely the same
		c.stack.body = body
	}
}

// sameFunc reports whether f and g are the same func value: the same
// closure, or the same function without one (its one static func value).
// False for two closures of one function, which Reset then stores.
func sameFunc(f, g func()) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&f)) == *(*unsafe.Pointer)(unsafe.Pointer(&g))
}

// dropLinks clears the record's owner and its links to other records,
// each only if set: storing nil over nil would still run the collector's
// write barrier while it marks (finish and Reset run once per virtual
// thread).
func (c *contHead) dropLinks() {
	if c.owner != nil {
		c.owner = nil
	}
	if c.parentC != nil {
		c.parentC = nil
	}
	if c.target != nil {
		c.target = nil
	}
	if c.child != nil {
		c.child = nil
	}
}

// Scope returns the scope the continuation is delimited by.
func (c *Cont) Scope() *scope.Scope { return c.scope }

// IsDone reports whether the body has returned, panicked or exited.
func (c *Cont) IsDone() bool {
	st := state(c.state.Load())
	return st == stDone || st == stCancelling
}

// Owner returns the handle passed to the Run that mounted the continuation,
// or nil when it is not mounted.
func (c *Cont) Owner() any { return c.owner }

// PanicStack returns where a panic with value v began, for a deferred
// call that recovered v from a panic weft raised again. A panic may reach
// c's return barrier while frozen frames under it have deferred calls
// pending. It is then recovered there and raised again, with the same
// value, in the innermost of those frames (docs/design.md). The stack the
// deferred call sees starts at weft's frozenPanic, without the frames
// where the panic was raised. PanicStack returns the goroutine's stack
// trace, as runtime.Stack formats it, from when the panic first reached
// the barrier. It returns the same trace if the panic crosses a barrier
// again, and to the deferred calls of Run's caller once it has ended c's
// body.
//
// On the portable backend each body runs on a goroutine of its own. Run
// raises a panic that ends one again in the goroutine that called it, as
// iter.Pull does. The deferred calls there see a stack without the body's
// frames. PanicStack gives them the stack trace of the body goroutine
// where the panic began. Ask it of c from the goroutine that called c's
// Run, when the panic ended c's body. Ask it from c's body when the panic
// ended the body of a continuation nested in c; each level hands it on.
//
// PanicStack returns nil when the running panic was not raised again by
// weft or by a portable Run (its own stack is then complete), when v is
// not its value (matched by interface words, not ==), and once c has
// yielded since. The result must not be modified.
func (c *Cont) PanicStack(v any) []byte {
	if !useStackCopy {
		return c.ptPanicStack(v)
	}
	return c.barrierPanicStack(v)
}

// sameInterface reports whether a and b hold the same interface words:
// the same dynamic type and the same data word, without comparing the
// values (which may not be comparable).
func sameInterface(a, b any) bool {
	return *(*[2]unsafe.Pointer)(unsafe.Pointer(&a)) == *(*[2]unsafe.Pointer)(unsafe.Pointer(&b))
}

// Stats returns a snapshot of the continuation's counters, all zero for a
// record made by NewUncountedCont. It is safe to call from any goroutine
// at any time, except concurrently with Reset (which starts c's counters
// again and must not overlap any use of c).
func (c *Cont) Stats() Stats {
	n := c.counters()
	if n == nil {
		return Stats{}
	}
	return Stats{
		Runs:   n.runs.Load(),
		Yields: n.yields.Load(),
		Pinned: n.pinned.Load(),

		FramesFrozen: n.framesFrozen.Load(),
		BytesFrozen:  n.bytesFrozen.Load(),
		FramesThawed: n.framesThawed.Load(),
		BytesThawed:  n.bytesThawed.Load(),
		Unwinds:      n.unwinds.Load(),
		Templated:    n.templated.Load(),
	}
}

// Current returns the innermost continuation of scope s mounted on the
// calling goroutine, or nil if there is none. A nil s panics with an error
// wrapping ErrNotInScope.
func Current(s *scope.Scope) *Cont {
	l := gls.Current()
	if l != nil && contOf(l).scope == s && s != nil {
		return contOf(l) // the innermost: the usual case
	}
	return currentOuter(s, l)
}

// currentOuter is Current's search past the innermost continuation l
// (nil if none is mounted).
func currentOuter(s *scope.Scope, l *gls.Local) *Cont {
	if s == nil {
		panic(nilScope("Current"))
	}
	if l == nil {
		return nil
	}
	for c := contOf(l); c != nil; c = c.parent() {
		if c.scope == s {
			return c
		}
	}
	return nil
}

// Innermost returns the innermost continuation mounted on the calling
// goroutine, of any scope, or nil if there is none: the one whose body is
// running. An executor uses it to tell whether code runs directly in its
// own continuation or inside another one that this body mounted.
func Innermost() *Cont {
	l := gls.Current()
	if l == nil {
		return nil
	}
	return contOf(l)
}

// parent returns the continuation whose body called the Run that mounted c,
// or nil if a plain goroutine called it. Only meaningful while c is mounted.
func (c *Cont) parent() *Cont {
	if !c.parentResolved {
		if c.pt == nil {
			panic("weft: internal error: the parent of a continuation mounted by the stack-copying backend is unresolved")
		}
		if l := gls.Of(c.pt.callerG); l != nil {
			c.parentC = contOf(l)
		}
		c.parentResolved = true
	}
	return c.parentC
}

// onChain reports whether c is mounted on the calling goroutine's chain of
// continuations.
func (c *Cont) onChain() bool {
	l := gls.Current()
	if l == nil {
		return false
	}
	for x := contOf(l); x != nil; x = x.parent() {
		if x == c {
			return true
		}
	}
	return false
}

// The engine recognises its own frames, and those of packages continuation
// and scheduler, by their functions' names in the runtime's tables. The
// module path in those names comes from functions' own names rather than
// from a string literal, so that a copy of the module under another path
// (a fork, a renamed vendored copy) still recognises every one of them.
// The linker escapes the dots of the last element of a package path
// ("example.com/weft.v1" names its functions "example.com/weft%2ev1.F"),
// so this package's prefix comes from one of its own functions and the
// module path from a subpackage's (pinning.Do's). The function is
// nameAnchor, which calls nothing, so that these variables depend on
// nothing else of the engine's.
var (
	// enginePrefix is the prefix of the names of this package's functions:
	// the module path, escaped as the linker does, and a dot.
	enginePrefix = strings.TrimSuffix(funcName(nameAnchor), "nameAnchor")
	// modulePath is the module's path, which the names of the functions of
	// its other packages start with.
	modulePath = strings.TrimSuffix(funcName(pinning.Do), "/pinning.Do")
	// yieldName is weft.Yield's name in the runtime's tables.
	yieldName = enginePrefix + "Yield"
	// contYieldName is continuation.Yield's name, which calls weft.Yield.
	contYieldName = modulePath + "/continuation.Yield"
)

// nameAnchor is the function whose name gives enginePrefix.
func nameAnchor() {}

// funcName returns the name of the function f (a func value of a
// top-level function or method expression) in the runtime's tables.
func funcName(f any) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
}
