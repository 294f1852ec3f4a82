package weft

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// This file is the freeze/thaw profile, the analogue of JFR's
// jdk.ContinuationFreeze and jdk.ContinuationThaw events: per call chain,
// what the engine's freezes and thaws did. The stack-copying backend's
// hooks are in freezeprof_amd64.go, the portable backend's in portable.go.

// FreezeRecord is one call chain's line of the freeze/thaw profile. Its
// counts are scaled by the sampling rate, as the block profile's are.
type FreezeRecord struct {
	// Stack is the call chain, innermost first, as runtime.Callers
	// gives it (one PC per logical frame, inlined calls included). On
	// the stack-copying backend it is the continuation's frozen frames:
	// after a freeze, where the body yielded; before a thaw, where it
	// resumes. On the portable backend it is the body
	// goroutine's stack at its Yield call, down to the body.
	Stack []uintptr
	// Captures counts freezes (a yield's suspension of one continuation);
	// Templated those of them that took the stack-copying backend's fast
	// path (a capture template, Stats.Templated).
	Captures, Templated uint64
	// FramesFrozen and BytesFrozen count what the freezes copied to the
	// heap, as Stats counts them.
	FramesFrozen, BytesFrozen uint64
	// Thaws counts resumes: each mount that continued frozen frames.
	Thaws uint64
	// FramesThawed and BytesThawed count what the thaws copied back, as
	// Stats counts them: the records thawed lazily, under the return
	// barrier, in the run that each resume started.
	FramesThawed, BytesThawed uint64
	// Crossings counts the barrier crossings of those runs: records
	// thawed lazily when a thawed frame returned into the barrier, after
	// the first record that each resume thaws.
	Crossings uint64
}

// maxFreezeStack bounds a record's stack, in frames: a deeper chain is
// cut at its innermost maxFreezeStack frames.
const maxFreezeStack = 128

// freezeProf is the engine-wide freeze/thaw profile.
var freezeProf struct {
	// rate is SetFreezeProfileRate's; the hooks test it, once per
	// freeze and per thaw, before anything else.
	rate atomic.Int64
	mu   sync.Mutex
	// m maps a stack's PCs, as bytes, to its record.
	m map[string]*FreezeRecord
}

// SetFreezeProfileRate turns the freeze/thaw profile on or off: rate 0
// turns it off (the default), rate 1 records every freeze and every thaw,
// and rate n records on average one in n, chosen at random, counted n
// times. It holds for every continuation of the process, counted or not
// (virtual threads' records included). Records are kept until the process
// ends; turning the profile off stops adding to them. A negative rate is
// taken as 0.
//
// With the profile off, a freeze and a thaw each pay one load and one
// branch for it (docs/benchmarks.md).
func SetFreezeProfileRate(rate int) {
	if rate < 0 {
		rate = 0
	}
	freezeProf.rate.Store(int64(rate))
}

// FreezeProfileRate returns the rate SetFreezeProfileRate set.
func FreezeProfileRate() int { return int(freezeProf.rate.Load()) }

// FreezeProfile returns the freeze/thaw profile's records, one per call
// chain, in no particular order: copies, which the caller owns. Package
// vtprof writes them for go tool pprof (WriteFreezeProfile).
func FreezeProfile() []FreezeRecord {
	freezeProf.mu.Lock()
	defer freezeProf.mu.Unlock()
	out := make([]FreezeRecord, 0, len(freezeProf.m))
	for _, r := range freezeProf.m {
		c := *r
		c.Stack = logicalPCs(r.Stack)
		out = append(out, c)
	}
	return out
}

// freezeSampled decides whether this freeze or thaw is recorded, and
// returns the weight it counts with (0 if not). The profile is on.
func freezeSampled() uint64 {
	rate := freezeProf.rate.Load()
	if rate <= 0 {
		return 0
	}
	if rate > 1 && rand.Int64N(rate) != 0 {
		return 0
	}
	return uint64(rate)
}

// addFreeze adds to the record of stack what f says, each count scaled
// by weight.
func addFreeze(stack []uintptr, weight uint64, f FreezeRecord) {
	if len(stack) > maxFreezeStack {
		stack = stack[:maxFreezeStack]
	}
	var key string
	if len(stack) > 0 {
		key = unsafe.String((*byte)(unsafe.Pointer(&stack[0])), len(stack)*int(unsafe.Sizeof(stack[0])))
	}
	freezeProf.mu.Lock()
	defer freezeProf.mu.Unlock()
	r := freezeProf.m[key]
	if r == nil {
		if freezeProf.m == nil {
			freezeProf.m = make(map[string]*FreezeRecord)
		}
		r = &FreezeRecord{Stack: append([]uintptr(nil), stack...)}
		// The key must not alias the caller's stack slice.
		key = unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(r.Stack))), len(key))
		freezeProf.m[key] = r
	}
	r.Captures += f.Captures * weight
	r.Templated += f.Templated * weight
	r.FramesFrozen += f.FramesFrozen * weight
	r.BytesFrozen += f.BytesFrozen * weight
	r.Thaws += f.Thaws * weight
	r.FramesThawed += f.FramesThawed * weight
	r.BytesThawed += f.BytesThawed * weight
	r.Crossings += f.Crossings * weight
}

// trimEngine returns the number of this package's frames at the top of
// pcs: those up to weft.Yield's, or if it has none (a continuation
// suspended by a yield from one nested in it), up to its caller of Run.
func trimEngine(pcs []uintptr) int {
	n := 0
	for i, pc := range pcs {
		f := runtime.FuncForPC(pc - 1)
		if f == nil || !strings.HasPrefix(f.Name(), enginePrefix) {
			break
		}
		if f.Name() == yieldName {
			return i + 1
		}
		n = i + 1
	}
	return n
}

// bodyStartName is the name of the function that a portable body
// goroutine starts in and calls the body from (Cont.start's closure).
var bodyStartName = enginePrefix + "(*Cont).start.func1"

// profilePortable records a yield (resumed false) or a resume (true) of a
// continuation on the portable backend, with the calling goroutine's
// stack from the first frame outside this package (the body's Yield
// call) down to the body: the frames the stack-copying backend would
// freeze. The portable backend copies no frames, so only the counts of
// captures and thaws grow.
//
//go:noinline
func profilePortable(resumed bool) {
	w := freezeSampled()
	if w == 0 {
		return
	}
	pcs := make([]uintptr, maxFreezeStack+16)
	pcs = pcs[:runtime.Callers(2, pcs)]
	pcs = pcs[trimEngine(pcs):]
	// Below the body, the body goroutine's start: the engine's frames and
	// the runtime's, which the stack-copying backend never freezes.
	for i, pc := range pcs {
		if f := runtime.FuncForPC(pc - 1); f != nil && f.Name() == bodyStartName {
			pcs = pcs[:i]
			break
		}
	}
	if resumed {
		addFreeze(pcs, w, FreezeRecord{Thaws: 1})
	} else {
		addFreeze(pcs, w, FreezeRecord{Captures: 1})
	}
}
