package tracer

import (
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weftrt/weft/trace/internal/target"
)

// Symbolizer turns a program counter of the target into a frame.
type Symbolizer interface {
	Symbolize(pc uint64) target.Frame
}

// Options says what the aggregation reports live.
type Options struct {
	// LongFreeze is the freeze duration from which a freeze is reported
	// live and goes into the profile; SlowWake the wake-to-run delay from
	// which a wake-up is reported live.
	LongFreeze, SlowWake time.Duration
	// Verbose prints a line for every event, not only for the rare ones.
	Verbose bool
}

// Aggregator pairs events into durations, keyed by goroutine,
// continuation and virtual thread, and counts them by call site. Its zero
// value is not usable; see NewAggregator.
type Aggregator struct {
	sym  Symbolizer
	opt  Options
	live io.Writer

	first, last uint64 // timestamps
	events      uint64
	counts      map[countKey]uint64
	hists       map[histKey]*histogram
	siteLoc     map[string]string // a site's file:line, from its first PC
	conts, vts  map[uint64]bool

	mounts  map[uint64][]mount   // by goroutine: its mounted continuations
	yields  map[uint64]pending   // by goroutine: the Yield under way
	parks   map[uint64]pending   // by goroutine: the pinned park under way
	runs    map[uint64][]pending // by goroutine (carrier): virtual threads running
	wakes   map[uint64]pending   // by virtual thread: its wake-up
	lastPin map[uint64]string    // by goroutine: the site of its last pin

	// KeysChecked counts the events whose continuation, read from the
	// goroutine's word, was compared with the one Run mounted on that
	// goroutine (a register argument); KeysDiffer counts those that
	// differed, which would mean a wrong g-word offset.
	KeysChecked, KeysDiffer uint64

	// Samples are the pins, pinned parks and long freezes, with stacks,
	// for the profile.
	Samples []Sample
}

// Sample is one event of the profile.
type Sample struct {
	Event    string // "pin", "park-pinned" or "long-freeze"
	Reason   string // for pins and pinned parks
	Duration time.Duration
	Stack    []uint64 // innermost first
}

type countKey struct {
	kind   Kind
	site   string
	detail string
}

type histKey struct {
	name string
	site string
}

type mount struct {
	cont, ts uint64
	site     string
	thawed   bool
}

type pending struct {
	ts, cont, vt uint64
	site         string
	stack        []uint64
}

// NewAggregator returns an aggregator that symbolizes with sym and writes
// its live lines to live.
func NewAggregator(sym Symbolizer, opt Options, live io.Writer) *Aggregator {
	return &Aggregator{
		sym: sym, opt: opt, live: live,
		counts:  make(map[countKey]uint64),
		hists:   make(map[histKey]*histogram),
		siteLoc: make(map[string]string),
		conts:   make(map[uint64]bool),
		vts:     make(map[uint64]bool),
		mounts:  make(map[uint64][]mount),
		yields:  make(map[uint64]pending),
		parks:   make(map[uint64]pending),
		runs:    make(map[uint64][]pending),
		wakes:   make(map[uint64]pending),
		lastPin: make(map[uint64]string),
	}
}

// Histogram names.
const (
	HistFreeze     = "freeze"       // Yield called to Run returned, by Yield's caller
	HistThaw       = "thaw"         // Run called to the frame continued, by where it continues
	HistContRun    = "run-slice"    // a continuation's Run, by Run's caller
	HistVTRun      = "vt-run-slice" // a virtual thread's run slice
	HistWakeToRun  = "wake-to-run"  // made runnable to run, by who woke it
	HistParkPinned = "pinned-park"  // a pinned park's blocking, by the pin's site
)

// site names the function of pc, a return address if ret (the call is
// before it).
func (a *Aggregator) site(pc uint64, ret bool) string {
	if pc == 0 {
		return "?"
	}
	q := pc
	if ret {
		q--
	}
	f := a.sym.Symbolize(q)
	if f.Function == "" {
		return fmt.Sprintf("%#x", pc)
	}
	if _, ok := a.siteLoc[f.Function]; !ok {
		// The line of the call, if it is in the function's own file;
		// otherwise pc is in a callee inlined there, and the function's
		// first line says where it is.
		loc := f
		if d := a.sym.Symbolize(f.Entry); d.File != f.File {
			loc = d
		}
		a.siteLoc[f.Function] = fmt.Sprintf("%s:%d", shortFile(loc.File), loc.Line)
	}
	return f.Function
}

func shortFile(f string) string {
	if i := strings.LastIndexByte(f, '/'); i >= 0 {
		if j := strings.LastIndexByte(f[:i], '/'); j >= 0 {
			return f[j+1:]
		}
	}
	return f
}

func (a *Aggregator) count(k Kind, site, detail string) {
	a.counts[countKey{k, site, detail}]++
}

func (a *Aggregator) observe(name, site string, d uint64) {
	k := histKey{name, site}
	h := a.hists[k]
	if h == nil {
		h = &histogram{}
		a.hists[k] = h
	}
	h.add(d)
}

func (a *Aggregator) rel(ts uint64) string {
	return fmt.Sprintf("%10.6f", float64(ts-a.first)/1e9)
}

func (a *Aggregator) line(e Event, format string, args ...any) {
	if a.live == nil {
		return
	}
	who := fmt.Sprintf("tid=%d g=%#x", e.TID, e.G)
	if e.Cont != 0 {
		who += fmt.Sprintf(" cont=%#x", e.Cont)
	}
	if e.VT != 0 {
		who += fmt.Sprintf(" vt=%#x", e.VT)
	}
	fmt.Fprintf(a.live, "%s %-15s %s %s\n", a.rel(e.TS), e.Kind, who, fmt.Sprintf(format, args...))
}

// Add takes one event, in time order per thread.
func (a *Aggregator) Add(e Event) {
	if a.events == 0 {
		a.first = e.TS
	}
	a.events++
	a.last = max(a.last, e.TS)
	if e.Cont != 0 {
		a.conts[e.Cont] = true
	}
	if e.VT != 0 {
		a.vts[e.VT] = true
	}
	verbose := a.opt.Verbose
	switch e.Kind {
	case KindYield, KindParkPinned, KindThaw:
		if ms := a.mounts[e.G]; len(ms) > 0 {
			a.KeysChecked++
			if ms[len(ms)-1].cont != e.Cont {
				a.KeysDiffer++
			}
		}
	}
	switch e.Kind {
	case KindPin:
		site := a.site(e.A2, true)
		why := reason(e.A1)
		a.count(KindPin, site, why)
		a.lastPin[e.G] = site
		a.Samples = append(a.Samples, Sample{Event: "pin", Reason: why, Stack: e.Stack})
		a.line(e, "reason=%q site=%s (%s)", why, site, a.siteLoc[site])
		return
	case KindParkPinned:
		a.parks[e.G] = pending{ts: e.TS, cont: e.Cont, site: a.lastPin[e.G], stack: e.Stack}
	case KindParkPinnedEnd:
		p, ok := a.parks[e.G]
		if !ok {
			break
		}
		delete(a.parks, e.G)
		d := e.TS - p.ts
		a.count(KindParkPinned, p.site, "")
		a.observe(HistParkPinned, p.site, d)
		a.Samples = append(a.Samples, Sample{Event: "park-pinned", Reason: "blocked carrier", Duration: time.Duration(d), Stack: p.stack})
		a.line(e, "blocked=%v site=%s", time.Duration(d), p.site)
		return
	case KindYield:
		a.yields[e.G] = pending{ts: e.TS, cont: e.Cont, site: a.site(e.A1, true), stack: e.Stack}
	case KindYieldReturn:
		// Nothing was suspended: the pin says why.
		delete(a.yields, e.G)
	case KindMount:
		a.mounts[e.G] = append(a.mounts[e.G], mount{cont: e.Cont, ts: e.TS, site: a.site(e.A1, true)})
	case KindUnmount:
		ms := a.mounts[e.G]
		if len(ms) == 0 {
			break
		}
		m := ms[len(ms)-1]
		a.mounts[e.G] = ms[:len(ms)-1]
		a.observe(HistContRun, m.site, e.TS-m.ts)
		y, ok := a.yields[e.G]
		if !ok {
			break
		}
		delete(a.yields, e.G)
		d := e.TS - y.ts
		a.count(KindYield, y.site, "")
		a.observe(HistFreeze, y.site, d)
		if a.opt.LongFreeze > 0 && time.Duration(d) >= a.opt.LongFreeze {
			a.Samples = append(a.Samples, Sample{Event: "long-freeze", Duration: time.Duration(d), Stack: y.stack})
			a.line(Event{TS: e.TS, Kind: KindYield, TID: e.TID, G: e.G, Cont: y.cont}, "long freeze %v site=%s", time.Duration(d), y.site)
		}
	case KindThaw:
		site := a.site(e.A1, true)
		ms := a.mounts[e.G]
		if n := len(ms); n > 0 && !ms[n-1].thawed {
			ms[n-1].thawed = true
			a.count(KindThaw, site, "resume")
			a.observe(HistThaw, site, e.TS-ms[n-1].ts)
		} else {
			// A record beneath the first, thawed lazily when the
			// thawed frames return to it.
			a.count(KindThaw, site, "barrier")
		}
	case KindRun:
		a.runs[e.G] = append(a.runs[e.G], pending{ts: e.TS, vt: e.VT})
		if w, ok := a.wakes[e.VT]; ok {
			delete(a.wakes, e.VT)
			d := e.TS - w.ts
			a.observe(HistWakeToRun, w.site, d)
			if a.opt.SlowWake > 0 && time.Duration(d) >= a.opt.SlowWake {
				a.line(e, "slow wake-up %v woken by %s", time.Duration(d), w.site)
			}
		}
	case KindRunEnd:
		rs := a.runs[e.G]
		if len(rs) == 0 {
			break
		}
		r := rs[len(rs)-1]
		a.runs[e.G] = rs[:len(rs)-1]
		a.count(KindRun, "", "")
		a.observe(HistVTRun, "", e.TS-r.ts)
	case KindWake:
		site := a.site(e.A1, true)
		a.count(KindWake, site, "")
		a.wakes[e.VT] = pending{ts: e.TS, vt: e.VT, site: site}
	}
	if verbose {
		a.line(e, "")
	}
}

// Count is one row of the counts: how many events of a kind a site had.
type Count struct {
	Kind   Kind
	Site   string // the function; "" where the kind has no site
	Detail string // the pin's reason, or the thaw's kind
	N      uint64
}

// Counts returns the counts, by kind and then most frequent first.
func (a *Aggregator) Counts() []Count {
	var cs []Count
	for k, n := range a.counts {
		cs = append(cs, Count{k.kind, k.site, k.detail, n})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Kind != cs[j].Kind {
			return cs[i].Kind < cs[j].Kind
		}
		if cs[i].N != cs[j].N {
			return cs[i].N > cs[j].N
		}
		return cs[i].Site+cs[i].Detail < cs[j].Site+cs[j].Detail
	})
	return cs
}

// WriteSummary writes the counts and the latency histograms.
func (a *Aggregator) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "%d events over %v, %d continuations, %d virtual threads seen\n\n",
		a.events, time.Duration(a.last-a.first).Round(time.Microsecond), len(a.conts), len(a.vts))
	if a.KeysChecked > 0 {
		fmt.Fprintf(w, "continuation keys: %d checked against the mounted one, %d differ\n", a.KeysChecked, a.KeysDiffer)
	}
	fmt.Fprintf(w, "counts (kind, count, site, detail):\n")
	for _, c := range a.Counts() {
		site := c.Site
		if site == "" {
			site = "-"
		}
		fmt.Fprintf(w, "  %-13s %8d  %s", c.Kind, c.N, site)
		if c.Detail != "" {
			fmt.Fprintf(w, "  %s", c.Detail)
		}
		fmt.Fprintln(w)
	}
	keys := make([]histKey, 0, len(a.hists))
	for k := range a.hists {
		keys = append(keys, k)
	}
	order := []string{HistFreeze, HistThaw, HistContRun, HistVTRun, HistWakeToRun, HistParkPinned}
	slices.SortFunc(keys, func(x, y histKey) int {
		if c := slices.Index(order, x.name) - slices.Index(order, y.name); c != 0 {
			return c
		}
		return a.hists[y].n() - a.hists[x].n()
	})
	for _, k := range keys {
		h := a.hists[k]
		fmt.Fprintf(w, "\n%s", k.name)
		if k.site != "" {
			fmt.Fprintf(w, " at %s (%s)", k.site, a.siteLoc[k.site])
		}
		fmt.Fprintf(w, ": n=%d min=%v p50=%v p90=%v p99=%v max=%v\n", h.n(),
			h.quantile(0), h.quantile(0.5), h.quantile(0.9), h.quantile(0.99), h.quantile(1))
		h.write(w)
	}
}

// histogram keeps every duration (a trace is short) and draws them in
// power-of-two buckets.
type histogram struct{ ds []uint64 }

func (h *histogram) add(d uint64) { h.ds = append(h.ds, d) }
func (h *histogram) n() int       { return len(h.ds) }

func (h *histogram) quantile(q float64) time.Duration {
	slices.Sort(h.ds)
	i := int(q * float64(len(h.ds)-1))
	return time.Duration(h.ds[i])
}

func (h *histogram) write(w io.Writer) {
	var buckets [65]int
	lo, hi, top := 64, 0, 0
	for _, d := range h.ds {
		b := bits.Len64(d)
		buckets[b]++
		lo, hi = min(lo, b), max(hi, b)
		top = max(top, buckets[b])
	}
	for b := lo; b <= hi; b++ {
		from, to := time.Duration(0), time.Duration(1)
		if b > 0 {
			from, to = time.Duration(1)<<(b-1), time.Duration(1)<<b
		}
		bar := strings.Repeat("#", (buckets[b]*40+top-1)/top)
		fmt.Fprintf(w, "  [%9v, %9v) %8d %s\n", from, to, buckets[b], bar)
	}
}
