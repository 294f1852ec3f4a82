package continuation_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// A randomized differential test in the manner of Loom's Fuzz.java. A seed
// determines a random program: a tree of calls, loops, yields (to the
// innermost scope or to an enclosing one), local computations whose values
// stay live across yields (integers, strings, slices, maps, interfaces,
// closures, pointers to stack locals), deferred calls (some of which
// yield), panics recovered by an ancestor, deep recursion, callbacks from
// the standard library, calls through reflect.Value.Call and nested
// continuations. An interpreter runs
// the program with real Go recursion, once plainly and once inside
// continuations driven to completion, resumed at random on other
// goroutines, and the two runs must produce the same trace of events and
// the same result.
//
// Some 15% of the programs (chosen by a hash of the seed, so that the
// others are the programs they always were) may also end by
// runtime.Goexit: from a node at any depth, or from a deferred call, while
// the program returns, panics or already exits. Their call frames may
// also defer calls that panic while a Goexit unwinds them (others recover
// such panics, and the Goexit then goes on), and calls that run a nested
// continuation to completion, resuming it after each of its yields, from
// the deferred call (so during a Goexit or a panic, too); the bodies of
// those may panic during the Goexit as well. Each run is on a goroutine of
// its own, so that a Goexit ends only that run, and the runs must also
// agree on the panic that escaped the goroutine, if any, and on whether
// it ended by Goexit. These are the paths where the stack-copying backend
// carries a Goexit, or a panic raised during one, across the lazy-thaw
// return barrier into frames still frozen with deferred calls pending
// (docs/design.md, "Panics and Goexit across the barrier"), and where the
// portable backend raises such a panic again on Run's caller during a
// Goexit of its own (raiseDuringGoexit).
//
// In the plain run a yield just records "y" (the yield) and "r" (the resume
// of the continuation it suspends, as the driver would). In the
// continuation run the yield records "y" and calls continuation.Yield, and
// the loop that drives the suspended continuation records "r" when its Run
// returns; so the traces are equal only if every yield suspended exactly
// the continuation it should have and everything it computed survived.

// diffOp is the kind of a program node.
type diffOp uint8

const (
	diffOpCall   diffOp = iota // a new Go frame with its own locals; runs its children
	diffOpYield                // yield to the scope of an enclosing depth
	diffOpWork                 // local computation, through a pointer to a stack slot
	diffOpLoop                 // runs its children n times
	diffOpPanic                // panics; an enclosing call recovers (exiting: only during a Goexit; maybe none)
	diffOpNest                 // creates a nested continuation and drives it to completion
	diffOpDeep                 // recursion n frames deep, then runs its children
	diffOpMap                  // runs its children from a callback of strings.Map, n times
	diffOpGoexit               // runs its children (a yield or none), then calls runtime.Goexit the n+1st time
)

var diffOpNames = [...]string{"call", "yield", "work", "loop", "panic", "nest", "deep", "strings.Map", "goexit"}

type diffNode struct {
	id   int
	op   diffOp
	kids []*diffNode
	n    int // loop: iterations; deep: frames; work: amount

	// yield: the depth whose scope the yield names, and the depth of the
	// continuation it suspends (deeper when a nested continuation reuses
	// the scope and so shadows the outer one).
	target, eff int

	// call: defers a call that records an event; recovers panics of the
	// program (and rethrows a new one); yields from its deferred call
	// when it returns normally (not while panicking, which would pin).
	deferTrace, recovers, rethrow bool
	deferYield                    *diffNode

	// call, in programs with Goexit: a nested continuation (a nest node)
	// that a deferred call runs to completion, or nil; whether that
	// deferred call then panics if the goroutine is exiting by Goexit;
	// the run of it (0, 1, ...) that calls runtime.Goexit, or -1; and
	// whether it is deferred before the call above, and so runs after it.
	// They run in a deferred call of their own (gxDeferred).
	deferNest   *diffNode
	deferPanic  bool
	deferGoexit int
	gxLate      bool

	// call: the runtime defer records of a frame around the call's frame
	// (recordsFrame): 0 for none, k > 0 for k calls deferred in a loop
	// (heap records), -1 for nine deferred calls (stack records).
	records int

	// panic: panics only if the goroutine is exiting by Goexit (a panic
	// that no enclosing call need recover: it may escape the goroutine).
	exiting bool

	// call: runs through reflect.Value.Call (diffMarkReflect).
	viaReflect bool

	// nest: the depth whose scope the nested continuation reuses, or -1
	// for a fresh scope; whether its Run may be called on another
	// goroutine (then no yield below names a scope outside it).
	scopeOf int
	crossG  bool
}

type diffProgram struct {
	seed  uint64
	root  *diffNode
	nodes int
	gx    bool // the program may end by runtime.Goexit
}

func (p *diffProgram) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "program for seed %d (%d nodes", p.seed, p.nodes)
	if p.gx {
		b.WriteString(", with Goexit")
	}
	b.WriteString("):\n")
	var walk func(n *diffNode, indent int)
	walk = func(n *diffNode, indent int) {
		fmt.Fprintf(&b, "%s%s#%d", strings.Repeat("  ", indent), diffOpNames[n.op], n.id)
		switch n.op {
		case diffOpYield:
			fmt.Fprintf(&b, " to depth %d", n.target)
			if n.eff != n.target {
				fmt.Fprintf(&b, " (shadowed: suspends depth %d)", n.eff)
			}
		case diffOpLoop, diffOpDeep, diffOpWork, diffOpMap:
			fmt.Fprintf(&b, " n=%d", n.n)
		case diffOpGoexit:
			fmt.Fprintf(&b, " on run %d", n.n)
		case diffOpPanic:
			if n.exiting {
				b.WriteString(" while exiting")
			}
		case diffOpCall:
			if n.viaReflect {
				b.WriteString(" via-reflect")
			}
			if n.deferTrace {
				b.WriteString(" defer")
			}
			if n.records != 0 {
				fmt.Fprintf(&b, " records %d", n.records)
			}
			if n.recovers {
				b.WriteString(" recover")
			}
			if n.rethrow {
				b.WriteString(" rethrow")
			}
			if y := n.deferYield; y != nil {
				fmt.Fprintf(&b, " deferred-yield#%d to depth %d", y.id, y.target)
				if y.eff != y.target {
					fmt.Fprintf(&b, " (shadowed: suspends depth %d)", y.eff)
				}
			}
			if n.deferPanic || n.deferGoexit >= 0 || n.deferNest != nil {
				b.WriteString(" deferred-call")
				if n.gxLate {
					b.WriteString("(late)")
				}
				if n.deferNest != nil {
					fmt.Fprintf(&b, " nest#%d", n.deferNest.id)
				}
				if n.deferPanic {
					b.WriteString(" panic-while-exiting")
				}
				if n.deferGoexit >= 0 {
					fmt.Fprintf(&b, " goexit-on-run-%d", n.deferGoexit)
				}
			}
		case diffOpNest:
			if n.scopeOf >= 0 {
				fmt.Fprintf(&b, " reusing the scope of depth %d", n.scopeOf)
			}
			if n.crossG {
				b.WriteString(" resumed on other goroutines")
			}
		}
		b.WriteByte('\n')
		for _, k := range n.kids {
			walk(k, indent+1)
		}
		if n.deferNest != nil {
			fmt.Fprintf(&b, "%s(run by call#%d's deferred call:)\n", strings.Repeat("  ", indent+1), n.id)
			walk(n.deferNest, indent+1)
		}
	}
	walk(p.root, 1)
	return b.String()
}

// diffStats counts the features the generated programs exercise, so that
// the test can insist the generator does not degrade into trivial programs.
type diffStats struct {
	yields, outerYields, shadowed, nests, crossG, panics, rethrows, deep, loops, defers int
	deferYields, maps, records                                                          int
	// In programs with Goexit: the programs, Goexit nodes, deferred calls
	// that may call Goexit, panic while exiting, or run a nested
	// continuation, and panic nodes that panic while exiting.
	gxPrograms, goexits, deferGoexits, deferPanics, deferNests, exitPanics int
	// Counted in the runs: nodes generated, events and yields executed;
	// programs that ended by Goexit, and whose panic escaped the goroutine.
	nodes, events, dynYields, endedGoexit, escaped int
	// Panics and Goexits that the stack-copying backend's return barrier
	// carried into frozen frames with deferred calls pending.
	unwinds int
	// Programs in which a deferred call ran during a Goexit that the
	// barrier had carried into frozen frames (under weft's frozenGoexit),
	// and during a panic raised by a deferred call of a Goexit, that the
	// barrier had carried there (under frozenGoexitPanic).
	gxFrozen, gxPanicFrozen int
	// Programs in which a panic raised during a Goexit left a
	// continuation's body (the portable backend raises it again on Run's
	// caller during a Goexit of its own: raiseDuringGoexit).
	gxPanicLeft int
	// Call nodes run through reflect.Value.Call, and yields under them
	// (continuation runs).
	reflectCalls, reflectYields int
}

type diffGen struct {
	r         *rand.Rand
	nextID    int
	maxNodes  int
	dynYields int // yields the program will execute, bounded
	labels    int // scope identities handed out
	stats     *diffStats
	gx        bool // the program may end by Goexit: it has the nodes for it
	// rec draws the call nodes' runtime defer records (diffNode.records),
	// apart from r: the other draws are what they were without them.
	rec *rand.Rand
}

// diffCtx describes the position of the code being generated.
type diffCtx struct {
	depth     int   // continuation nesting depth: 0 is the top body
	labels    []int // the scope identity of each depth 0..depth
	minTarget int   // the shallowest depth a yield may name
	canPanic  bool  // an enclosing call recovers
	loops     int   // product of the enclosing loops' counts
	frames    int   // enclosing call and deep nodes
	inDefer   bool  // in the body of a nested continuation a deferred call runs
}

const (
	diffMaxDynYields = 2500
	diffMaxDepth     = 3
	diffMaxFrames    = 24
	// The percentage of programs that may end by Goexit.
	diffGoexitPercent = 15
)

func diffGenerate(seed uint64, stats *diffStats) *diffProgram {
	g := &diffGen{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), stats: stats, rec: rand.New(rand.NewPCG(seed, 0xdefe7))}
	switch x := g.r.IntN(10); {
	case x < 2:
		g.maxNodes = 2 + g.r.IntN(8)
	case x < 9:
		g.maxNodes = 10 + g.r.IntN(90)
	default:
		g.maxNodes = 100 + g.r.IntN(200)
	}
	// Whether the program has Goexit is drawn apart from g.r, whose draws
	// the other programs then make as they always did: they are the
	// programs they were before there was Goexit.
	if g.gx = diffMix(seed, 0x60e817)%100 < diffGoexitPercent; g.gx {
		stats.gxPrograms++
	}
	goexits := stats.goexits
	g.labels = 1
	ctx := diffCtx{labels: []int{0}, loops: 1}
	root := g.call(ctx)
	if g.gx && g.stats.goexits == goexits {
		// Small programs often draw no goexit node.
		ctx.frames, ctx.canPanic = 1, root.recovers
		root.kids = append(root.kids, g.goexit(ctx))
	}
	diffMarkReflect(root, seed, stats)
	return &diffProgram{seed: seed, root: root, nodes: g.nextID, gx: g.gx}
}

// diffMarkReflect marks one call node in five, chosen by a hash of the
// seed and the node, to run through reflect.Value.Call. The hash leaves
// g.r's draws, and so the programs' shapes, as they are without it.
func diffMarkReflect(n *diffNode, seed uint64, stats *diffStats) {
	if n == nil {
		return
	}
	if n.op == diffOpCall && diffMix(seed^0x7ef1ec7, uint64(n.id))%5 == 0 {
		n.viaReflect = true
		stats.reflectCalls++
	}
	for _, k := range n.kids {
		diffMarkReflect(k, seed, stats)
	}
	diffMarkReflect(n.deferNest, seed, stats)
}

func (g *diffGen) newNode(o diffOp) *diffNode {
	n := &diffNode{id: g.nextID, op: o}
	g.nextID++
	return n
}

// kids generates 1..max children.
func (g *diffGen) kids(ctx diffCtx, max int) []*diffNode {
	k := 1 + g.r.IntN(max)
	out := make([]*diffNode, 0, k)
	for range k {
		out = append(out, g.node(ctx))
	}
	return out
}

func (g *diffGen) call(ctx diffCtx) *diffNode {
	n, ctx := g.callHead(ctx)
	n.kids = g.kids(ctx, 4)
	if ctx.frames == 1 {
		// The root call takes what is left of the node budget.
		for g.nextID < g.maxNodes {
			n.kids = append(n.kids, g.node(ctx))
		}
	}
	return n
}

// callHead returns a call node without children, and the context of its
// children.
func (g *diffGen) callHead(ctx diffCtx) (*diffNode, diffCtx) {
	n := g.newNode(diffOpCall)
	n.deferGoexit = -1
	n.deferTrace = g.r.IntN(3) == 0
	n.recovers = g.r.IntN(4) == 0
	n.rethrow = n.recovers && ctx.canPanic && g.r.IntN(3) == 0
	if n.deferTrace {
		g.stats.defers++
	}
	if n.rethrow {
		g.stats.rethrows++
	}
	if g.r.IntN(6) == 0 {
		if n.deferYield = g.yield(ctx); n.deferYield != nil {
			g.stats.deferYields++
		}
	}
	if g.gx {
		g.gxDeferred(n, ctx)
	}
	if g.rec.IntN(5) == 0 {
		n.records = -1
		if g.rec.IntN(2) == 0 {
			n.records = 1 + g.rec.IntN(3)
		}
		g.stats.records++
	}
	ctx.canPanic = ctx.canPanic || n.recovers
	ctx.frames++
	return n, ctx
}

// goexit returns a goexit node, or most of the time a chain of calls that
// ends in one: the calls' frames, and their deferred calls, are then under
// the frames that the Goexit starts in, and often still frozen when it
// starts, if it yields first (a lazy thaw thaws the two frames under the
// yield, then records of eight frames or more).
func (g *diffGen) goexit(ctx diffCtx) *diffNode {
	var top, last *diffNode
	if g.r.IntN(4) != 0 {
		for k := 3 + g.r.IntN(8); k > 0 && ctx.frames < diffMaxFrames; k-- {
			var c *diffNode
			c, ctx = g.callHead(ctx)
			if last == nil {
				top = c
			} else {
				last.kids = []*diffNode{c}
			}
			last = c
		}
	}
	n := g.newNode(diffOpGoexit)
	// The run that exits is one of the first that the enclosing loops
	// make. Most yield first, so that the Goexit often starts in frames
	// just thawed, with those under them still frozen.
	n.n = g.r.IntN(min(ctx.loops, 3))
	if g.r.IntN(4) != 0 {
		if y := g.yield(ctx); y != nil {
			n.kids = []*diffNode{y}
		}
	}
	g.stats.goexits++
	if last == nil {
		return n
	}
	last.kids = []*diffNode{n}
	return top
}

// gxDeferred chooses what the deferred call of call node n does in a
// program with Goexit; ctx is the call's.
func (g *diffGen) gxDeferred(n *diffNode, ctx diffCtx) {
	n.gxLate = g.r.IntN(2) == 0
	if n.deferPanic = g.r.IntN(3) == 0; n.deferPanic {
		g.stats.deferPanics++
	}
	if g.r.IntN(12) == 0 {
		n.deferGoexit = g.r.IntN(min(ctx.loops, 3))
		g.stats.deferGoexits++
	}
	if g.r.IntN(3) == 0 && g.nextID < g.maxNodes && ctx.depth < diffMaxDepth && ctx.frames < diffMaxFrames {
		// The deferred call runs while the frame returns, panics or
		// exits by Goexit: a yield to an enclosing scope there would be
		// pinned in the latter two, so the nested body yields only to its
		// own. A panic out of the body may be recovered by what encloses
		// the call, not by the call itself (the deferred call that
		// recovers may have run already).
		ctx.frames++
		ctx.inDefer = true
		n.deferNest = g.nest(ctx, true)
		g.stats.deferNests++
	}
}

// nest returns a nest node; inDefer: for a deferred call (gxDeferred).
func (g *diffGen) nest(ctx diffCtx, inDefer bool) *diffNode {
	n := g.newNode(diffOpNest)
	n.scopeOf = -1
	label := g.labels
	if g.r.IntN(4) == 0 {
		n.scopeOf = g.r.IntN(ctx.depth + 1)
		label = ctx.labels[n.scopeOf]
	} else {
		g.labels++
	}
	ctx.depth++
	ctx.labels = append(slices.Clip(ctx.labels), label)
	if g.r.IntN(3) == 0 {
		n.crossG = true
		ctx.minTarget = ctx.depth
		g.stats.crossG++
	}
	if inDefer {
		ctx.minTarget = ctx.depth
	}
	n.kids = g.kids(ctx, 4)
	g.stats.nests++
	return n
}

// yield returns a yield node, or nil if the program has enough yields.
func (g *diffGen) yield(ctx diffCtx) *diffNode {
	if g.dynYields+ctx.loops > diffMaxDynYields {
		return nil
	}
	g.dynYields += ctx.loops
	n := g.newNode(diffOpYield)
	n.target = ctx.depth
	if g.r.IntN(2) == 0 {
		n.target = ctx.minTarget + g.r.IntN(ctx.depth-ctx.minTarget+1)
	}
	n.eff = n.target
	for u := ctx.depth; u > n.target; u-- {
		if ctx.labels[u] == ctx.labels[n.target] {
			n.eff = u
			break
		}
	}
	g.stats.yields++
	if n.eff < ctx.depth {
		g.stats.outerYields++
	}
	if n.eff != n.target {
		g.stats.shadowed++
	}
	return n
}

func (g *diffGen) node(ctx diffCtx) *diffNode {
	full := g.nextID >= g.maxNodes
	for {
		if g.gx {
			// Drawn only in programs with Goexit: the others draw what
			// they always did.
			switch y := g.r.IntN(100); {
			case y < 3:
				return g.goexit(ctx)
			case y < 12 && ctx.inDefer:
				// Only a deferred call runs while the goroutine exits.
				n := g.newNode(diffOpPanic)
				n.exiting = true
				g.stats.exitPanics++
				return n
			}
		}
		x := g.r.IntN(100)
		switch {
		case x < 30:
			if n := g.yield(ctx); n != nil {
				return n
			}
		case x < 45:
			n := g.newNode(diffOpWork)
			n.n = g.r.IntN(20)
			return n
		case x < 63:
			if full || ctx.frames >= diffMaxFrames {
				continue
			}
			return g.call(ctx)
		case x < 72:
			if full || ctx.loops > 16 {
				continue
			}
			n := g.newNode(diffOpLoop)
			n.n = 1 + g.r.IntN(4)
			ctx.loops *= n.n
			n.kids = g.kids(ctx, 3)
			g.stats.loops++
			return n
		case x < 80:
			if full || ctx.depth >= diffMaxDepth {
				continue
			}
			return g.nest(ctx, false)
		case x < 84:
			if full || ctx.loops > 16 {
				continue
			}
			n := g.newNode(diffOpMap)
			n.n = 1 + g.r.IntN(2)
			ctx.loops *= n.n
			n.kids = g.kids(ctx, 2)
			g.stats.maps++
			return n
		case x < 88:
			if full || ctx.frames >= diffMaxFrames {
				continue
			}
			n := g.newNode(diffOpDeep)
			if g.r.IntN(8) == 0 {
				n.n = 300 + g.r.IntN(700) // grows the goroutine stack
			} else {
				n.n = 1 + g.r.IntN(40)
			}
			ctx.frames++
			n.kids = g.kids(ctx, 2)
			g.stats.deep++
			return n
		case x < 92:
			if !ctx.canPanic {
				continue
			}
			g.stats.panics++
			return g.newNode(diffOpPanic)
		default:
			n := g.newNode(diffOpWork)
			n.n = g.r.IntN(5)
			return n
		}
	}
}

// diffPanic is the value the program's panics carry.
type diffPanic struct {
	id  int
	val uint64
}

type diffMode int

const (
	diffPlain diffMode = iota
	diffCont
)

// diffInterp runs a program. In a continuation run its state is touched from
// several goroutines, but never at once: they hand over through Run and
// Yield.
type diffInterp struct {
	mode  diffMode
	rng   *rand.Rand // the drivers' choices (continuation run only)
	trace []string
	errs  []string

	frames      int   // active callFrame and deepFrame frames
	yieldFrames int   // frames when the last Yield was called
	suspends    []int // per depth: suspensions of the continuation there

	hits    []int // per node: runs of a goexit node, or of a call's deferred call
	exiting bool  // the goroutine is exiting by runtime.Goexit

	conts []*continuation.Continuation // those driven, for their Stats
	// A deferred call ran under weft's frozenGoexit, or frozenGoexitPanic
	// (probeGoexit).
	sawGoexit, sawGoexitPanic bool
	// reflectCalls is the number of reflectCallFrame frames on the stack;
	// reflectYields counts the yields made with one or more.
	reflectCalls, reflectYields int
	// A panic raised during a Goexit that began in a continuation's body
	// left the body (plain run only: plainBody).
	goexitPanicLeft bool

	// labelCtx holds, per call node, a context with pprof labels of its
	// own, which its frame sets for its children (frameLabels).
	labelCtx map[int]context.Context
}

// frameLabels gives the calling goroutine the pprof labels of call node
// id, and returns them. Every call frame sets its own for its children and
// puts its caller's back as it ends, however it ends; the runs check that
// a frame finds its own after each child, whatever the child suspended
// and wherever it was resumed, that a nested continuation's body starts
// with the labels of the code that created it, and that whoever calls
// Run has its own back after it (docs/api.md, "Profiler labels"). In the
// plain run these hold by construction; the continuation run holds them
// only if each body carries its own labels across yields and goroutines.
func (in *diffInterp) frameLabels(id int) unsafe.Pointer {
	ctx, ok := in.labelCtx[id]
	if !ok {
		if in.labelCtx == nil {
			in.labelCtx = make(map[int]context.Context)
		}
		ctx = pprof.WithLabels(context.Background(), pprof.Labels("diff", strconv.Itoa(id)))
		in.labelCtx[id] = ctx
	}
	pprof.SetGoroutineLabels(ctx)
	return profLabel()
}

// wantLabels fails the run if the calling goroutine's labels are not want.
func (in *diffInterp) wantLabels(want unsafe.Pointer, format string, args ...any) {
	if got := profLabel(); got != want {
		in.fail("%s: pprof labels %s, want %s", fmt.Sprintf(format, args...), labelsOf(got), labelsOf(want))
	}
}

// setProfLabel sets the calling goroutine's profiler labels, as
// pprof.SetGoroutineLabels does, from labels profLabel returned.
//
//go:linkname setProfLabel runtime/pprof.runtime_setProfLabel
func setProfLabel(labels unsafe.Pointer)

// diffEnv is what the code at one continuation depth knows.
type diffEnv struct {
	depth  int
	scopes []*scope.Scope
	conts  []*continuation.Continuation
}

func (in *diffInterp) ev(kind string, a, b int) {
	in.trace = append(in.trace, kind+strconv.Itoa(a)+"."+strconv.Itoa(b))
}

func (in *diffInterp) fail(format string, args ...any) {
	in.errs = append(in.errs, fmt.Sprintf(format, args...))
}

func diffMix(a, b uint64) uint64 {
	x := a ^ (b + 0x9e3779b97f4a7c15 + a<<6 + a>>2)
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x
}

func diffStrHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// body is the entry of the program and of every nested continuation: its
// stack slot is what the work nodes directly below it update.
//
//go:noinline
func (in *diffInterp) body(kids []*diffNode, e *diffEnv, arg uint64) uint64 {
	var slot [2]uint64
	p := &slot[arg%2]
	*p = arg
	r := in.seq(kids, e, arg, p)
	return diffMix(diffMix(r, slot[0]), slot[1])
}

func (in *diffInterp) seq(kids []*diffNode, e *diffEnv, acc uint64, p *uint64) uint64 {
	for _, k := range kids {
		acc = diffMix(acc, in.exec(k, e, acc, p))
	}
	return acc
}

func (in *diffInterp) exec(n *diffNode, e *diffEnv, acc uint64, p *uint64) uint64 {
	switch n.op {
	case diffOpCall:
		if n.records != 0 {
			return in.recordsFrame(n, e, acc)
		}
		return in.callNode(n, e, acc)
	case diffOpYield:
		in.yield(n, e)
		return diffMix(acc, uint64(n.id))
	case diffOpWork:
		v := acc
		for i := range n.n {
			v = diffMix(v, uint64(i))
		}
		*p = diffMix(*p, v)
		return v
	case diffOpLoop:
		r := acc
		for i := range n.n {
			in.ev("l", n.id, i)
			r = diffMix(r, in.seq(n.kids, e, r+uint64(i), p))
		}
		return r
	case diffOpPanic:
		if n.exiting && !in.exiting {
			return diffMix(acc, uint64(n.id))
		}
		in.ev("p", n.id, 0)
		panic(&diffPanic{id: n.id, val: diffMix(acc, *p)})
	case diffOpGoexit:
		acc = in.seq(n.kids, e, acc, p)
		if in.hits[n.id]++; in.hits[n.id] > n.n {
			in.goexit("g", n.id)
		}
		return diffMix(acc, uint64(n.id))
	case diffOpNest:
		return in.nest(n, e, acc)
	case diffOpDeep:
		return in.deepFrame(n, e, acc, p, n.n)
	case diffOpMap:
		r := acc
		strings.Map(func(c rune) rune {
			in.ev("m", n.id, int(c))
			r = diffMix(r, in.seq(n.kids, e, r+uint64(c), p))
			return c
		}, "ab"[:n.n])
		return r
	}
	panic("unknown op")
}

// reflectCallFrame runs callFrame through reflect.Value.Call: reflect's
// frames (reflect.Value.call, runtime.reflectcall, a runtime.callN
// trampoline) lie between the call frame and its caller.
//
//go:noinline
func (in *diffInterp) reflectCallFrame(n *diffNode, e *diffEnv, arg uint64) uint64 {
	in.reflectCalls++
	defer func() { in.reflectCalls-- }() // a panic or Goexit may leave the call
	out := reflect.ValueOf((*diffInterp).callFrame).Call([]reflect.Value{reflect.ValueOf(in), reflect.ValueOf(n), reflect.ValueOf(e), reflect.ValueOf(arg)})
	return out[0].Uint()
}

// callFrame runs a call node in a frame of its own, with locals of many
// kinds that stay live across whatever its children do (yields among
// them), and checks them afterwards.
//
//go:noinline
func (in *diffInterp) callFrame(n *diffNode, e *diffEnv, arg uint64) (res uint64) {
	in.frames++
	myFrames := in.frames
	normal := false // the body reached its return
	// The frame's own labels for its children, and its caller's back as
	// it ends (the first deferred call, so the last to run).
	outerLabels := profLabel()
	defer setProfLabel(outerLabels)
	myLabels := in.frameLabels(n.id)
	gx := n.deferPanic || n.deferGoexit >= 0 || n.deferNest != nil
	if gx && n.gxLate {
		defer func() { in.gxDeferred(n, e, &res) }()
	}
	if n.recovers || n.deferTrace || n.deferYield != nil {
		defer func() {
			in.probeGoexit()
			if n.recovers {
				if r := recover(); r != nil {
					pp, ok := r.(*diffPanic)
					if !ok {
						panic(r) // not the program's: a failure
					}
					in.frames = myFrames - 1
					in.ev("v", n.id, pp.id)
					res = diffMix(pp.val, uint64(n.id))
					if n.rethrow {
						in.ev("t", n.id, 0)
						panic(&diffPanic{id: n.id, val: res})
					}
				}
			}
			if n.deferTrace {
				in.ev("d", n.id, int(res%1000))
			}
			if n.deferYield != nil && normal {
				in.frames++ // this frame is still on the stack
				in.yield(n.deferYield, e)
				in.frames--
				res = diffMix(res, uint64(n.deferYield.id))
			}
		}()
	}
	if gx && !n.gxLate {
		defer func() {
			// It runs before the deferred call above: if it panics or
			// exits, the frame does not return normally after all.
			ok := normal
			normal = false
			in.gxDeferred(n, e, &res)
			normal = ok
		}()
	}
	in.ev("c", n.id, 0)

	var local [4]uint64 // p points into it: a pointer to a stack local
	p := &local[n.id%4]
	*p = arg
	local[(n.id+1)%4] = arg ^ 0xff
	x := arg ^ uint64(n.id)*0x9e3779b97f4a7c15
	s := "c" + strconv.Itoa(n.id) + ":" + strconv.FormatUint(arg%1000, 10)
	s0 := s
	sl := make([]uint64, 0, 2)
	var iface any = n
	var istr any = s0
	m := map[int]string{n.id: s0}
	f := func() uint64 { return x*3 + uint64(len(s)) } // closes over stack locals

	for i, k := range n.kids {
		r := in.exec(k, e, x+uint64(i), p)
		in.wantLabels(myLabels, "call#%d after child %d", n.id, i)
		x = diffMix(x, r)
		s += strconv.Itoa(int(r % 10))
		sl = append(sl, r)
	}

	if iface.(*diffNode) != n {
		in.fail("call#%d: interface local changed", n.id)
	}
	if istr.(string) != s0 || m[n.id] != s0 || !strings.HasPrefix(s, s0) {
		in.fail("call#%d: string locals changed: %q %q %q, want %q", n.id, istr, m[n.id], s, s0)
	}
	if len(sl) != len(n.kids) || local[(n.id+1)%4] != arg^0xff {
		in.fail("call#%d: slice or array local changed", n.id)
	}
	res = diffMix(x, f())
	res = diffMix(res, diffStrHash(s))
	for _, v := range sl {
		res = diffMix(res, v)
	}
	for _, v := range local {
		res = diffMix(res, v)
	}
	in.frames--
	in.ev("C", n.id, int(res%100000))
	normal = true
	return res
}

// callNode runs call node n's frame, through reflect.Value.Call if the
// node says so.
func (in *diffInterp) callNode(n *diffNode, e *diffEnv, acc uint64) uint64 {
	if n.viaReflect {
		return in.reflectCallFrame(n, e, acc)
	}
	return in.callFrame(n, e, acc)
}

// recordsFrame runs call node n's frame under a frame with runtime defer
// records (diffNode.records): calls deferred in a loop, or nine deferred
// calls, whose closures are on the stack and share a local. Each records
// an event as it runs: by the frame's return, or by a panic or Goexit
// passing it.
//
//go:noinline
func (in *diffInterp) recordsFrame(n *diffNode, e *diffEnv, acc uint64) (res uint64) {
	if n.records > 0 {
		for i := range n.records {
			defer func() { in.ev("R", n.id, i); res = diffMix(res, uint64(i)) }()
		}
		return in.callNode(n, e, acc)
	}
	local := int(acc % 1000)
	defer func() { in.ev("R", n.id, local); res = diffMix(res, uint64(local)) }()
	defer func() { local++ }()
	defer func() { local += 2 }()
	defer func() { local *= 3 }()
	defer func() { local++ }()
	defer func() { local += 5 }()
	defer func() { local *= 7 }()
	defer func() { local++ }()
	defer func() { in.ev("R", n.id, local) }()
	r := in.callNode(n, e, acc)
	local += int(r % 100)
	return r
}

// gxDeferred is the deferred call of call node n that programs with Goexit
// add (diffNode.deferNest); res is the frame's result.
func (in *diffInterp) gxDeferred(n *diffNode, e *diffEnv, res *uint64) {
	in.probeGoexit()
	if x := n.deferNest; x != nil {
		*res = diffMix(*res, in.nest(x, e, *res))
	}
	if n.deferPanic && in.exiting {
		in.ev("q", n.id, 0)
		panic(&diffPanic{id: n.id, val: diffMix(*res, uint64(n.id))})
	}
	if n.deferGoexit >= 0 {
		if in.hits[n.id]++; in.hits[n.id] > n.deferGoexit {
			in.goexit("G", n.id)
		}
	}
}

// goexit records that the program calls runtime.Goexit, and calls it.
func (in *diffInterp) goexit(kind string, id int) {
	in.ev(kind, id, 0)
	in.exiting = true
	runtime.Goexit()
}

// probeGoexit notes, in a deferred call of the continuation run during a
// Goexit, whether the stack-copying backend's return barrier carried the
// Goexit into frozen frames and this deferred call is one of theirs
// (frozenGoexit on the stack), or carried a panic raised during the Goexit
// there (frozenGoexitPanic), so that the test knows these paths ran.
func (in *diffInterp) probeGoexit() {
	if !in.exiting || in.mode != diffCont || (in.sawGoexit && in.sawGoexitPanic) {
		return
	}
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		switch f.Function {
		case "github.com/weftrt/weft.frozenGoexit":
			in.sawGoexit = true
		case "github.com/weftrt/weft.frozenGoexitPanic":
			in.sawGoexitPanic = true
		}
		if !more {
			return
		}
	}
}

// deepFrame recurses k frames, each with a live local, then runs the
// node's children.
//
//go:noinline
func (in *diffInterp) deepFrame(n *diffNode, e *diffEnv, arg uint64, p *uint64, k int) uint64 {
	in.frames++
	var pad [6]uint64
	pad[k%6] = arg + uint64(k)
	var r uint64
	if k <= 1 {
		in.ev("D", n.id, n.n)
		r = in.seq(n.kids, e, arg, p)
	} else {
		r = in.deepFrame(n, e, arg*7+1, p, k-1)
	}
	if pad[k%6] != arg+uint64(k) {
		in.fail("deep#%d: local at level %d changed", n.id, k)
	}
	in.frames--
	return diffMix(r, pad[k%6])
}

func (in *diffInterp) yield(n *diffNode, e *diffEnv) {
	in.ev("y", n.id, n.target)
	for d := n.eff; d <= e.depth; d++ {
		in.suspends[d]++
	}
	if in.mode == diffPlain {
		in.ev("r", n.eff, 0) // what the driver of depth eff records
		return
	}
	s := e.scopes[n.target]
	if cur := continuation.Current(s); cur != e.conts[n.eff] {
		in.fail("yield#%d: Current(scope of depth %d) is not the continuation of depth %d", n.id, n.target, n.eff)
	}
	in.yieldFrames = in.frames
	if in.reflectCalls > 0 {
		in.reflectYields++
	}
	if !continuation.Yield(s) {
		in.fail("yield#%d: Yield returned false", n.id)
	}
}

func (in *diffInterp) nest(n *diffNode, e *diffEnv, arg uint64) uint64 {
	in.ev("n", n.id, 0)
	var sc *scope.Scope
	if n.scopeOf < 0 {
		sc = scope.New("depth " + strconv.Itoa(e.depth+1))
	} else {
		sc = e.scopes[n.scopeOf]
	}
	ne := &diffEnv{
		depth:  e.depth + 1,
		scopes: append(slices.Clip(e.scopes), sc),
	}
	for len(in.suspends) <= ne.depth {
		in.suspends = append(in.suspends, 0)
	}
	in.suspends[ne.depth] = 0
	var res uint64
	creator := profLabel()
	body := func() {
		in.wantLabels(creator, "nest#%d: the body at its start (its creator's)", n.id)
		res = in.body(n.kids, ne, arg)
	}
	if in.mode == diffPlain {
		in.plainBody(body)
	} else {
		c := continuation.New(sc, body)
		ne.conts = append(slices.Clip(e.conts), c)
		in.drive(c, ne.depth, in.frames, n.crossG)
	}
	in.wantLabels(creator, "nest#%d: its creator after the body", n.id)
	in.ev("N", n.id, int(res%1000))
	return diffMix(res, arg)
}

// plainBody runs the body of a continuation in the plain run, and notes
// whether a panic raised during a Goexit that began in the body leaves it
// (diffRun.goexitPanicLeft).
func (in *diffInterp) plainBody(body func()) {
	exiting, returned := in.exiting, false
	defer func() {
		if !returned && !exiting && in.exiting && diffPanicking() {
			in.goexitPanicLeft = true
		}
	}()
	body()
	returned = true
}

// diffPanicking reports whether the deferred call that calls it runs
// because of a panic (which may have been raised during a Goexit), not a
// runtime.Goexit.
func diffPanicking() bool {
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		switch f.Function {
		case "runtime.gopanic":
			return true
		case "runtime.Goexit":
			return false
		}
		if !more {
			return false
		}
	}
}

// drive runs c to completion, on this goroutine, nested in a host
// continuation, or (if elsewhere) on other goroutines, at random; records
// each resume; and checks its stack trace and counters.
func (in *diffInterp) drive(c *continuation.Continuation, depth, base int, elsewhere bool) {
	in.conts = append(in.conts, c)
	runs := 0
	mine := profLabel()
	for {
		runs++
		switch x := in.rng.IntN(8); {
		case x < 3 && elsewhere:
			diffRunElsewhere(c)
		case x == 3:
			in.runInHost(c)
		default:
			c.Run()
		}
		in.wantLabels(mine, "the driver of depth %d after Run %d", depth, runs)
		if c.IsDone() {
			break
		}
		in.ev("r", depth, 0)
		if in.rng.IntN(8) == 0 {
			in.checkStack(c, depth, in.yieldFrames-base)
		}
		if in.rng.IntN(400) == 0 {
			runtime.GC()
		}
	}
	if st := c.Stats(); st.Runs != uint64(runs) || st.Yields != uint64(in.suspends[depth]) {
		in.fail("continuation at depth %d: Stats() = %d runs, %d yields; want %d runs, %d yields",
			depth, st.Runs, st.Yields, runs, in.suspends[depth])
	}
	if st := c.StackTrace(); st != nil {
		in.fail("continuation at depth %d: StackTrace when done = %d frames, want nil", depth, len(st))
	}
}

// checkStack checks that the suspended c's stack trace holds exactly the
// interpreter frames between its body and the yield point.
func (in *diffInterp) checkStack(c *continuation.Continuation, depth, want int) {
	frames := c.StackTrace()
	if frames == nil {
		in.fail("continuation at depth %d: StackTrace of a suspended continuation is nil", depth)
		return
	}
	got := 0
	for _, f := range frames {
		if strings.HasSuffix(f.Function, ".(*diffInterp).callFrame") || strings.HasSuffix(f.Function, ".(*diffInterp).deepFrame") {
			got++
		}
	}
	if got != want {
		in.fail("continuation at depth %d: StackTrace has %d interpreter frames, want %d (after event %d)", depth, got, want, len(in.trace))
	}
}

// runInHost calls c.Run from the body of a continuation of an unrelated
// scope, run on this goroutine: c is then nested in the host for this run
// (a yield to a scope outside c suspends the host with it), and the host
// finishes when c.Run returns.
func (in *diffInterp) runInHost(c *continuation.Continuation) {
	host := continuation.New(scope.New("host"), func() { c.Run() })
	host.Run()
	if !host.IsDone() {
		in.fail("the host continuation is suspended after its Run returned")
	}
}

// diffRunElsewhere calls c.Run on a new goroutine and waits for it; a panic
// out of Run is carried back and re-raised here, and so is runtime.Goexit,
// and a panic raised during a Goexit is raised again during one.
func diffRunElsewhere(c *continuation.Continuation) {
	var p any
	exited := true
	done := make(chan struct{})
	go func() {
		defer close(done)
		func() {
			// A panic raised during a Goexit goes on exiting once
			// recovered: this function then never returns.
			defer func() { p = recover() }()
			c.Run()
		}()
		exited = false
	}()
	<-done
	switch {
	case p != nil && exited:
		defer func() { panic(p) }()
		runtime.Goexit()
	case p != nil:
		panic(p)
	case exited: // runtime.Goexit in the body
		runtime.Goexit()
	}
}

// diffRun is what one run of a program did.
type diffRun struct {
	result  uint64
	trace   []string
	errs    []string // failures of checks made on the way
	escaped string   // the panic that escaped the goroutine, if any
	goexit  bool     // the goroutine ended by runtime.Goexit
	unwinds int      // Stats().Unwinds of the continuations driven

	sawGoexit, sawGoexitPanic, goexitPanicLeft bool // diffInterp's
	reflectYields                              int  // diffInterp's
}

// diffRunProgram runs p in the given mode on a goroutine of its own, so that
// a runtime.Goexit ends only that run.
func diffRunProgram(p *diffProgram, mode diffMode) *diffRun {
	in := &diffInterp{mode: mode, rng: rand.New(rand.NewPCG(p.seed, 0xd1ff)), suspends: []int{0}, hits: make([]int, p.nodes)}
	s0 := scope.New("depth 0")
	e := &diffEnv{scopes: []*scope.Scope{s0}}
	run := &diffRun{}
	body := func() { run.result = in.body([]*diffNode{p.root}, e, p.seed) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		run.goexit = true
		func() {
			// This recovers a panic that escapes the program, which may
			// be raised during a Goexit: then the Goexit goes on, and
			// the function below never returns.
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if pp, ok := r.(*diffPanic); ok {
					run.escaped = fmt.Sprintf("panic#%d %#x", pp.id, pp.val)
					if mode == diffPlain && !in.exiting {
						in.fail("a panic escaped the program outside a Goexit: %s", run.escaped)
					}
					return
				}
				in.fail("unexpected panic: %v\n%s", r, debug.Stack())
			}()
			if mode == diffPlain {
				in.plainBody(body)
				return
			}
			c := continuation.New(s0, body)
			e.conts = []*continuation.Continuation{c}
			in.drive(c, 0, 0, true)
		}()
		run.goexit = false
	}()
	<-done
	if !run.goexit && run.escaped == "" && in.frames != 0 {
		in.fail("interpreter frame count is %d at the end", in.frames)
	}
	if run.goexit && !in.exiting {
		in.fail("the goroutine ended by Goexit, but the program called none")
	}
	for _, c := range in.conts {
		if !c.IsDone() {
			in.fail("a continuation the program drove is not done at the end")
		}
		run.unwinds += int(c.Stats().Unwinds)
	}
	run.trace, run.errs = in.trace, in.errs
	run.sawGoexit, run.sawGoexitPanic = in.sawGoexit, in.sawGoexitPanic
	run.reflectYields = in.reflectYields
	run.goexitPanicLeft = in.goexitPanicLeft
	return run
}

// diffCheckSeed runs the program of seed both ways and describes any
// difference; it returns "" when the runs agree.
func diffCheckSeed(seed uint64, stats *diffStats) string {
	p := diffGenerate(seed, stats)
	want := diffRunProgram(p, diffPlain)
	if len(want.errs) > 0 {
		return fmt.Sprintf("seed %d: the plain run failed (a test bug): %s\n%v", seed, strings.Join(want.errs, "\n"), p)
	}
	stats.nodes += p.nodes
	stats.events += len(want.trace)
	for _, ev := range want.trace {
		if ev[0] == 'y' {
			stats.dynYields++
		}
	}
	if want.goexit {
		stats.endedGoexit++
	}
	if want.goexitPanicLeft {
		stats.gxPanicLeft++
	}
	if want.escaped != "" {
		stats.escaped++
	}
	got := diffRunProgram(p, diffCont)
	stats.unwinds += got.unwinds
	stats.reflectYields += got.reflectYields
	if got.sawGoexit {
		stats.gxFrozen++
	}
	if got.sawGoexitPanic {
		stats.gxPanicFrozen++
	}
	var b strings.Builder
	for _, e := range got.errs {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if !slices.Equal(got.trace, want.trace) {
		i := genFirstDiff(got.trace, want.trace)
		lo := max(0, i-8)
		fmt.Fprintf(&b, "  traces differ at event %d (continuation run has %d events, plain run %d):\n    continuations: %q\n    plain:         %q\n",
			i, len(got.trace), len(want.trace), got.trace[lo:min(i+8, len(got.trace))], want.trace[lo:min(i+8, len(want.trace))])
	}
	if got.result != want.result {
		fmt.Fprintf(&b, "  result %#x, want %#x\n", got.result, want.result)
	}
	if got.escaped != want.escaped {
		fmt.Fprintf(&b, "  escaped the goroutine: %q, want %q\n", got.escaped, want.escaped)
	}
	if got.goexit != want.goexit {
		fmt.Fprintf(&b, "  ended by Goexit: %v, want %v\n", got.goexit, want.goexit)
	}
	if b.Len() == 0 {
		return ""
	}
	return fmt.Sprintf("seed %d: the continuation run differs from the plain run (reproduce with WEFT_DIFF_SEED=%d go test -run TestDifferential):\n%s%v", seed, seed, b.String(), p)
}

// TestDifferential checks a thousand seeds (200 with -short; set
// WEFT_DIFF_N for more, WEFT_DIFF_SEED to run one seed).
func TestDifferential(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	if s := os.Getenv("WEFT_DIFF_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("WEFT_DIFF_N=%q: want a positive number", s)
		}
		n = v
	}
	first := uint64(1)
	if s := os.Getenv("WEFT_DIFF_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WEFT_DIFF_SEED=%q: want a number", s)
		}
		first, n = v, 1
	}
	var stats diffStats
	failures := 0
	for seed := first; seed < first+uint64(n); seed++ {
		if msg := diffCheckSeed(seed, &stats); msg != "" {
			t.Error(msg)
			if failures++; failures == 3 {
				t.Fatal("stopping after 3 failing seeds")
			}
		}
	}
	t.Logf("%d programs: %+v", n, stats)
	if n >= 50 {
		// The generator must keep producing every feature.
		for name, v := range map[string]int{
			"yields": stats.yields, "yields to an outer scope": stats.outerYields,
			"shadowed scopes": stats.shadowed, "nested continuations": stats.nests,
			"resumes on other goroutines": stats.crossG, "panics": stats.panics,
			"rethrows": stats.rethrows, "deep recursions": stats.deep, "loops": stats.loops,
			"defers": stats.defers, "yields in deferred calls": stats.deferYields,
			"strings.Map callbacks":             stats.maps,
			"calls through reflect":             stats.reflectCalls,
			"yields under reflect":              stats.reflectYields,
			"frames with runtime defer records": stats.records,
			"programs with Goexit":              stats.gxPrograms, "goexit nodes": stats.goexits,
			"Goexits in deferred calls":                       stats.deferGoexits,
			"deferred calls that panic during a Goexit":       stats.deferPanics,
			"nested continuations run by deferred calls":      stats.deferNests,
			"panics in those during a Goexit":                 stats.exitPanics,
			"runs that ended by Goexit":                       stats.endedGoexit,
			"panics that escaped a goroutine during a Goexit": stats.escaped,
			"panics raised during a Goexit that left a body":  stats.gxPanicLeft,
		} {
			if v == 0 {
				t.Errorf("%d programs had no %s", n, name)
			}
		}
		if gcsLazy() && stats.unwinds == 0 {
			t.Errorf("in %d programs no panic crossed the return barrier into frozen frames with deferred calls", n)
		}
	}
	if gcsLazy() && n >= 200 {
		// About 50 in 1,000 programs do each; the barrier's handling of
		// a panic raised during a Goexit is tested only by those that
		// carry one into frozen frames.
		if stats.gxFrozen < n/100 {
			t.Errorf("in %d programs %d Goexits were carried across the return barrier into frozen frames with deferred calls; want at least %d", n, stats.gxFrozen, n/100)
		}
		if stats.gxPanicFrozen < n/100 {
			t.Errorf("in %d programs %d panics raised during a Goexit were carried across the return barrier into frozen frames with deferred calls; want at least %d", n, stats.gxPanicFrozen, n/100)
		}
	}
}

// FuzzDifferential checks the program of one seed; go test runs the seeds
// added here, and go test -fuzz=FuzzDifferential searches for more.
func FuzzDifferential(f *testing.F) {
	for _, s := range []uint64{0, 7, 42, 1000, 123456789, 1 << 40, math.MaxUint64} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		if msg := diffCheckSeed(seed, new(diffStats)); msg != "" {
			t.Fatal(msg)
		}
	})
}
