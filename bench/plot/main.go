// Command plot draws the charts of docs/benchmarks.md from raw `go test
// -bench` output. By default, the round-trip chart: ns/op of
// BenchmarkRoundTrip against stack depth, one line per implementation,
// each point the median of the runs (-count) of that implementation and
// depth, both axes logarithmic. With -sched, the scheduler chart: for each
// scheduler benchmark, the median for goroutines divided by the median for
// virtual threads, as bars on a logarithmic axis. With -scale, the scaling
// chart: a benchmark's time per unit (BenchmarkSkynet's ns/spawn by
// default) against GOMAXPROCS, the -cpu suffix, one line per
// implementation.
//
//	go test -run='^$' -bench=RoundTrip -count=6 ./bench > bench.txt
//	go run ./bench/plot -in bench.txt -o docs/img/roundtrip.svg
//	go run ./bench/plot -sched -in bench/testdata/scheduler-linux-amd64.txt -o docs/img/scheduler.svg
//	go run ./bench/plot -scale -in bench/testdata/skynet-scaling-16core.txt -impl goroutine,vthread,vthread-unlocked -o docs/img/skynet-scaling.svg
//
// It uses only the standard library and writes a self-contained SVG.
package main

import (
	"flag"
	"fmt"
	"html"
	"io"
	"log"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	in := flag.String("in", "-", "raw go test -bench output (- for standard input)")
	out := flag.String("o", "-", "SVG file to write (- for standard output)")
	bench := flag.String("bench", "BenchmarkRoundTrip", "benchmark whose impl=/depth= sub-benchmarks to plot")
	impls := flag.String("impl", "", "comma-separated implementations to draw, in this order (all, in order of appearance, if empty)")
	sched := flag.Bool("sched", false, "draw the scheduler chart (virtual threads against goroutines) instead of the round trip")
	scale := flag.Bool("scale", false, "draw the scaling chart (-bench's -unit against GOMAXPROCS; -bench defaults to BenchmarkSkynet) instead of the round trip")
	unit := flag.String("unit", "ns/spawn", "the unit the -scale chart plots")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("plot: ")

	r := io.Reader(os.Stdin)
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		r = f
	}
	if *sched {
		s, err := parseAll(r)
		if err != nil {
			log.Fatal(err)
		}
		bars := schedBars(s)
		if len(bars) == 0 {
			log.Fatal("no scheduler benchmarks with both impl=vthread and impl=goroutine results in the input")
		}
		write(*out, renderSched(s, bars))
		return
	}
	var d *data
	var err error
	if *scale {
		if !isFlagSet("bench") {
			*bench = "BenchmarkSkynet"
		}
		d, err = parseScale(r, *bench, *unit)
	} else {
		d, err = parse(r, *bench)
	}
	if err != nil {
		log.Fatal(err)
	}
	if *impls != "" {
		if err := d.keep(strings.Split(*impls, ",")); err != nil {
			log.Fatal(err)
		}
	}
	if len(d.impls) == 0 {
		if *scale {
			log.Fatalf("no %s/impl=... results with %s in the input", *bench, *unit)
		}
		log.Fatalf("no %s/impl=.../depth=... results with ns/op in the input", *bench)
	}
	write(*out, render(d))
}

// write writes svg to the file out, or to standard output for "-".
func write(out, svg string) {
	var err error
	if out == "-" {
		_, err = os.Stdout.WriteString(svg)
	} else {
		err = os.WriteFile(out, []byte(svg), 0o644)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// data is what the chart shows.
type data struct {
	impls   []string          // in order of first appearance
	depths  []int             // ascending: the x values (stack depth, or GOMAXPROCS for -scale)
	samples map[key][]float64 // ns/op (or -unit) of every run
	config  map[string]string // configuration lines: cpu, goos, ...

	// The chart's words: title, axis labels, and what an x value is
	// called in a point's tooltip.
	title, xLabel, yLabel, xName string
}

// isFlagSet reports whether the flag name was given on the command line.
func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type key struct {
	impl  string
	depth int
}

// parse reads raw benchmark output and collects the ns/op of every
// bench/impl=I/depth=D result.
func parse(r io.Reader, bench string) (*data, error) {
	s, err := parseAll(r)
	if err != nil {
		return nil, err
	}
	d := &data{samples: map[key][]float64{}, config: s.config,
		title:  "Round trip (resume + suspend), ns/op vs stack depth",
		xLabel: "stack depth at the yield point (frames)",
		yLabel: "ns per round trip",
		xName:  "depth",
	}
	for _, name := range s.names {
		rest, ok := strings.CutPrefix(name, bench+"/")
		if !ok {
			continue
		}
		k, ok := parseName(rest)
		v := s.values[name]["ns/op"]
		if !ok || len(v) == 0 {
			continue
		}
		if !slices.Contains(d.impls, k.impl) {
			d.impls = append(d.impls, k.impl)
		}
		if !slices.Contains(d.depths, k.depth) {
			d.depths = append(d.depths, k.depth)
		}
		d.samples[k] = append(d.samples[k], v...)
	}
	slices.Sort(d.depths)
	return d, nil
}

// keep restricts d to the implementations named, in that order; naming one
// that d does not have is an error.
func (d *data) keep(impls []string) error {
	for _, im := range impls {
		if !slices.Contains(d.impls, im) {
			return fmt.Errorf("no results for impl=%s (have %s)", im, strings.Join(d.impls, ", "))
		}
	}
	d.impls = impls
	return nil
}

// median returns the median ns/op of the runs of k.
func (d *data) median(k key) (float64, bool) {
	s := slices.Clone(d.samples[k])
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// parseName parses "impl=I/depth=D-P", where -P is the GOMAXPROCS suffix
// go test adds when it is not 1.
func parseName(name string) (key, bool) {
	var k key
	var haveImpl, haveDepth bool
	parts := strings.Split(name, "/")
	for i, p := range parts {
		kv, val, ok := strings.Cut(p, "=")
		if !ok {
			return k, false
		}
		if i == len(parts)-1 {
			if j := strings.LastIndexByte(val, '-'); j > 0 {
				if _, err := strconv.Atoi(val[j+1:]); err == nil {
					val = val[:j]
				}
			}
		}
		switch kv {
		case "impl":
			k.impl, haveImpl = val, true
		case "depth":
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 {
				return k, false
			}
			k.depth, haveDepth = n, true
		}
	}
	return k, haveImpl && haveDepth
}

// Chart geometry, in SVG user units.
const (
	width, height             = 760, 460
	left, right, top, bottom  = 78, 170, 56, 58
	plotW, plotH              = width - left - right, height - top - bottom
	fontFamily                = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
	axisColor, gridColor, ink = "#444", "#ddd", "#222"
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// render draws the chart.
func render(d *data) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, impl := range d.impls {
		for _, dep := range d.depths {
			if v, ok := d.median(key{impl, dep}); ok && v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	// y: whole decades around the data.
	ylo := math.Pow(10, math.Floor(math.Log10(lo)))
	yhi := math.Pow(10, math.Ceil(math.Log10(hi)))
	if yhi <= ylo {
		yhi = ylo * 10
	}
	y := func(v float64) float64 {
		return top + plotH*(1-(math.Log10(v)-math.Log10(ylo))/(math.Log10(yhi)-math.Log10(ylo)))
	}
	// x: log of depth, with some room at both ends.
	xlo, xhi := math.Log10(float64(d.depths[0])), math.Log10(float64(d.depths[len(d.depths)-1]))
	if xhi == xlo {
		xlo, xhi = xlo-1, xhi+1
	}
	pad := (xhi - xlo) * 0.06
	xlo, xhi = xlo-pad, xhi+pad
	x := func(depth int) float64 {
		return left + plotW*(math.Log10(float64(depth))-xlo)/(xhi-xlo)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		width, height, width, height, fontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)

	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold" fill="%s">%s</text>`+"\n", left, ink, esc(d.title))
	var sub []string
	if be := d.config["weft-backend"]; be != "" {
		name, _, _ := strings.Cut(be, " ")
		sub = append(sub, "weft backend: "+name)
	}
	if c := d.config["cpu"]; c != "" {
		sub = append(sub, c)
	}
	if g, a := d.config["goos"], d.config["goarch"]; g != "" && a != "" {
		sub = append(sub, g+"/"+a)
	}
	sub = append(sub, "median of runs; log-log")
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#666">%s</text>`+"\n", left, esc(strings.Join(sub, " · ")))

	// Horizontal grid at 1, 2, 5 × 10^k, labelled.
	for dec := ylo; dec < yhi*1.001; dec *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := dec * m
			if v > yhi*1.001 {
				break
			}
			yy := y(v)
			stroke := gridColor
			if m == 1 {
				stroke = "#bbb"
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", left, yy, left+plotW, yy, stroke)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dy="0.35em" fill="%s">%s</text>`+"\n", left-6, yy, axisColor, esc(fmtNs(v)))
		}
	}
	// Vertical grid at each depth.
	for _, dep := range d.depths {
		xx := x(dep)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", xx, top, xx, top+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%d</text>`+"\n", xx, top+plotH+18, axisColor, dep)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", left, top, plotW, plotH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", left+plotW/2, height-14, ink, esc(d.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", top+plotH/2, ink, esc(d.yLabel))

	// One line per impl, with a marker at each point and a legend entry.
	for i, impl := range d.impls {
		color := palette[i%len(palette)]
		var pts []string
		for _, dep := range d.depths {
			if v, ok := d.median(key{impl, dep}); ok && v > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(dep), y(v)))
			}
		}
		fmt.Fprintf(&b, `<g fill="%s" stroke="%s">`+"\n", color, color)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
		for _, dep := range d.depths {
			if v, ok := d.median(key{impl, dep}); ok && v > 0 {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5"><title>%s</title></circle>`+"\n",
					x(dep), y(v), esc(fmt.Sprintf("%s, %s %d: %s (median of %d)", impl, d.xName, dep, fmtNs(v), len(d.samples[key{impl, dep}]))))
			}
		}
		ly := top + 14 + 22*i
		lx := left + plotW + 18
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke-width="2"/><circle cx="%d" cy="%d" r="3.5"/>`+"\n", lx, ly, lx+24, ly, lx+12, ly)
		fmt.Fprintf(&b, `<text x="%d" y="%d" stroke="none" fill="%s" dy="0.35em">%s</text>`+"\n", lx+32, ly, ink, esc(impl))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// fmtNs formats a duration in nanoseconds for an axis label.
func fmtNs(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + " ms"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + " µs"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64) + " ns"
	}
}

func esc(s string) string { return html.EscapeString(s) }
