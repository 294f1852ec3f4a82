// Package tracer attaches uprobes to weft's functions in a program's
// executable, and turns their events into live lines, a summary of counts
// and latency histograms by call site, and a pprof profile.
//
// The probed functions are in one table, Probes. Attach and Session are
// Linux-only; the rest reads events and binaries on any system.
package tracer

import "github.com/weftrt/weft/trace/internal/target"

// Kind is the kind of an event: which probe reported it.
type Kind uint32

// The event kinds, one per row of probes.
const (
	KindPin           Kind = iota + 1 // a pinned yield is reported (pinnedYield)
	KindParkPinned                    // a virtual thread's park was pinned: its carrier blocks
	KindParkPinnedEnd                 // that blocked park returns
	KindYield                         // Yield is called (the freeze begins)
	KindYieldReturn                   // Yield returns: nothing was suspended
	KindMount                         // Run mounts a continuation
	KindUnmount                       // Run returns: the continuation yielded or ended
	KindThaw                          // a frozen record is copied back and continued
	KindRun                           // a carrier runs a virtual thread
	KindRunEnd                        // the run slice ends
	KindWake                          // a parked virtual thread is made runnable
	numKinds
)

var kindNames = [numKinds]string{
	KindPin:           "pin",
	KindParkPinned:    "park-pinned",
	KindParkPinnedEnd: "park-pinned-end",
	KindYield:         "yield",
	KindYieldReturn:   "yield-return",
	KindMount:         "mount",
	KindUnmount:       "unmount",
	KindThaw:          "thaw",
	KindRun:           "vt-run",
	KindRunEnd:        "vt-run-end",
	KindWake:          "vt-wake",
}

func (k Kind) String() string {
	if k < numKinds && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Source is where a probe reads one word of its event.
type Source uint8

// The sources. Registers are those of Go's ABIInternal on amd64: the
// integer arguments in RAX, RBX, RCX, RDI, RSI, R8..R11, and g in R14.
const (
	None  Source = iota
	GWord        // the goroutine's weft word: the mounted continuation's record
	RAX          // first integer argument or receiver
	RBX          // second
	RCX          // third
	RDX          // the closure context; thawPop's continuation address
	AtSP         // the word at the stack pointer: the return address, at an entry
)

// Probe is one row of the table of probes: a function of weft in the
// target, where in it the probe goes, and what it reads.
type Probe struct {
	Kind   Kind
	Symbol string      // the function, as the symbol table names it
	Site   target.Site // its entry, its RETs, or its jumps through a register
	Cont   Source      // the continuation the event is about
	VT     Source      // the virtual thread the event is about
	A1, A2 Source      // two more words (see Event)
	Stack  bool        // the event carries the user stack (at an entry only)
	// PerYield marks the probes that fire on every yield, resume or
	// virtual-thread switch; they are attached only on request.
	PerYield bool
	// Optional marks the functions a weft program may leave out: the
	// scheduler's, in a program that does not use it, and those of the
	// parts of it that a program does not use. Attach skips them if
	// they are absent; the others must be there.
	Optional bool
}

// Probes is the one table of the weft functions the tracer probes. Each
// is a function whose role is stable and that the compiler does not
// inline (weft marks them go:noinline, or they are too large). The tests
// build a weft program from the tree they sit in and attach every row,
// so a renamed function fails them.
var Probes = []Probe{
	// (*Cont).pinnedYield(r pinning.Reason, pc uintptr) reports every
	// pinned yield: receiver t, the reason, and the pinning call site.
	{Kind: KindPin, Symbol: weftPkg + ".(*Cont).pinnedYield", Site: target.Entry, Cont: RAX, A1: RBX, A2: RCX, Stack: true},
	// parkPinned blocks the carrier of a virtual thread whose park was
	// pinned, until it is unparked.
	{Kind: KindParkPinned, Symbol: schedPkg + ".parkPinned", Site: target.Entry, Cont: GWord, Stack: true, Optional: true},
	{Kind: KindParkPinnedEnd, Symbol: schedPkg + ".parkPinned", Site: target.Returns, Cont: GWord, Optional: true},
	// Yield freezes from its caller's frame; a Yield that suspended
	// does not return (the resume continues its caller), so its RETs
	// run only for a yield that suspended nothing.
	{Kind: KindYield, Symbol: weftPkg + ".Yield", Site: target.Entry, Cont: GWord, A1: AtSP, Stack: true, PerYield: true},
	{Kind: KindYieldReturn, Symbol: weftPkg + ".Yield", Site: target.Returns, Cont: GWord, PerYield: true},
	// mount is Run, and the unwinding of an abandoned continuation:
	// entered to mount, returned from once the continuation has yielded
	// or ended, on the same goroutine.
	{Kind: KindMount, Symbol: weftPkg + ".(*Cont).mount", Site: target.Entry, Cont: RAX, A1: AtSP, PerYield: true},
	{Kind: KindUnmount, Symbol: weftPkg + ".(*Cont).mount", Site: target.Returns, PerYield: true},
	// thawPop copies a frozen record back and jumps into it (through a
	// register, with g in R14 and the continuation address in RDX).
	{Kind: KindThaw, Symbol: archPkg + ".thawPop.abi0", Site: target.RegisterJump, Cont: GWord, A1: RDX, PerYield: true},
	// (*carrier).run(vt) runs one slice of a virtual thread.
	{Kind: KindRun, Symbol: schedPkg + ".(*carrier).run", Site: target.Entry, VT: RBX, PerYield: true, Optional: true},
	{Kind: KindRunEnd, Symbol: schedPkg + ".(*carrier).run", Site: target.Returns, PerYield: true, Optional: true},
	// (*VThread).enqueue(c) queues a virtual thread that Unpark, a
	// channel, a join or a waiter's wake-up has just made runnable.
	{Kind: KindWake, Symbol: schedPkg + ".(*VThread).enqueue", Site: target.Entry, VT: RAX, A1: AtSP, PerYield: true, Optional: true},
	// (*VThread).wakeTimer wakes a virtual thread whose Sleep is over.
	{Kind: KindWake, Symbol: schedPkg + ".(*VThread).wakeTimer", Site: target.Entry, VT: RAX, A1: AtSP, PerYield: true, Optional: true},
}

const (
	weftPkg  = "github.com/weftrt/weft"
	schedPkg = weftPkg + "/scheduler"
	archPkg  = weftPkg + "/arch"
)
