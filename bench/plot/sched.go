package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The scheduler chart (-sched): for each of the scheduler benchmarks, how
// virtual threads compare with goroutines in the same run, as the ratio
// goroutine/vthread of a lower-is-better measure (time per operation,
// bytes per parked unit), so that a bar right of 1 means virtual threads
// do better. The x axis is logarithmic.

// schedRow is one bar: the median of unit for the vthread benchmark
// against the goroutine benchmark.
type schedRow struct {
	label            string
	vthread, routine string // benchmark names without the GOMAXPROCS suffix
	unit             string
}

var schedRows = []schedRow{
	{"skynet, 1.1 M units", "BenchmarkSkynet/impl=vthread", "BenchmarkSkynet/impl=goroutine", "ns/op"},
	{"echo, 32 clients", "BenchmarkEcho/impl=vthread", "BenchmarkEcho/impl=goroutine", "ns/op"},
	{"bytes per parked unit", "BenchmarkParkedMemory/impl=vthread", "BenchmarkParkedMemory/impl=goroutine", "B/parked"},
	{"park ping-pong, 1 carrier", "BenchmarkPingPong/impl=vthread/carriers=1", "BenchmarkPingPong/impl=goroutine", "ns/op"},
	{"Chan ping-pong", "BenchmarkChanPingPong/impl=vthread", "BenchmarkChanPingPong/impl=goroutine", "ns/op"},
	{"spawn + join, in a vthread", "BenchmarkSpawn/impl=vthread/from=vthread", "BenchmarkSpawn/impl=goroutine/from=goroutine", "ns/op"},
	{"spawn + join, from a goroutine", "BenchmarkSpawn/impl=vthread/from=goroutine", "BenchmarkSpawn/impl=goroutine/from=goroutine", "ns/op"},
	// The same with carriers not locked to their threads (absent from
	// older recordings, and then left out).
	{"skynet, unlocked carriers", "BenchmarkSkynet/impl=vthread-unlocked", "BenchmarkSkynet/impl=goroutine", "ns/op"},
	{"echo, unlocked carriers", "BenchmarkEcho/impl=vthread-unlocked", "BenchmarkEcho/impl=goroutine", "ns/op"},
	{"spawn from goroutine, unlocked", "BenchmarkSpawn/impl=vthread-unlocked/from=goroutine", "BenchmarkSpawn/impl=goroutine/from=goroutine", "ns/op"},
}

// benchSamples holds every value of every unit of every benchmark, by
// name without the GOMAXPROCS suffix.
type benchSamples struct {
	names  []string // in order of first appearance
	values map[string]map[string][]float64
	config map[string]string
}

func parseAll(r io.Reader) (*benchSamples, error) {
	s := &benchSamples{values: map[string]map[string][]float64{}, config: map[string]string{}}
	err := scanBench(r, s.config, func(name string, _ int, unit string, v float64) {
		if s.values[name] == nil {
			s.values[name] = map[string][]float64{}
			s.names = append(s.names, name)
		}
		s.values[name][unit] = append(s.values[name][unit], v)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// scanBench reads raw benchmark output: it stores each configuration line
// ("cpu: ...") in config and calls result for each value of each
// benchmark result line, with the name without go test's GOMAXPROCS
// suffix and GOMAXPROCS (1 where there is no suffix).
func scanBench(r io.Reader, config map[string]string, result func(name string, procs int, unit string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "Benchmark") && !strings.ContainsAny(k, " \t") {
			config[k] = strings.TrimSpace(v)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name, procs := splitProcs(f[0])
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("%q: %v", line, err)
			}
			result(name, procs, f[i+1], v)
		}
	}
	return sc.Err()
}

func (s *benchSamples) median(name, unit string) (float64, bool) {
	v := slices.Clone(s.values[name][unit])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2], true
	}
	return (v[n/2-1] + v[n/2]) / 2, true
}

// schedBar is a row with its medians.
type schedBar struct {
	schedRow
	vt, gr float64
}

func (b schedBar) ratio() float64 { return b.gr / b.vt }

// schedBars returns the rows present in s, in order.
func schedBars(s *benchSamples) []schedBar {
	var bars []schedBar
	for _, r := range schedRows {
		vt, ok1 := s.median(r.vthread, r.unit)
		gr, ok2 := s.median(r.routine, r.unit)
		if ok1 && ok2 && vt > 0 && gr > 0 {
			bars = append(bars, schedBar{r, vt, gr})
		}
	}
	return bars
}

// renderSched draws the chart.
func renderSched(s *benchSamples, bars []schedBar) string {
	lo, hi := 1.0, 1.0
	for _, b := range bars {
		lo, hi = min(lo, b.ratio()), max(hi, b.ratio())
	}
	xlo := math.Pow(10, math.Floor(math.Log10(lo)))
	xhi := math.Pow(10, math.Ceil(math.Log10(hi)))
	if xhi <= xlo {
		xhi = xlo * 10
	}
	const (
		w, rowH          = 760, 34
		l, r, t, bottom  = 210, 130, 56, 50
		plotWidth        = w - l - r
		better, worse    = "#2ca02c", "#d62728"
		barH             = 18
		labelCol, valCol = l - 10, w - r + 8
	)
	h := t + bottom + rowH*len(bars)
	x := func(v float64) float64 {
		return l + plotWidth*(math.Log10(v)-math.Log10(xlo))/(math.Log10(xhi)-math.Log10(xlo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n", w, h, w, h, fontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold" fill="%s">%s</text>`+"\n", 16, ink,
		esc("Virtual threads vs goroutines (right of 1×: virtual threads do better)"))
	var sub []string
	if be := s.config["weft-backend"]; be != "" {
		name, _, _ := strings.Cut(be, " ")
		sub = append(sub, "weft backend: "+name)
	}
	if c := s.config["cpu"]; c != "" {
		sub = append(sub, c)
	}
	sub = append(sub, "medians of runs; log scale")
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#666">%s</text>`+"\n", 16, esc(strings.Join(sub, " · ")))
	// Grid at 1, 2, 5 × 10^k.
	for dec := xlo; dec < xhi*1.001; dec *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := dec * m
			if v > xhi*1.001 {
				break
			}
			stroke := gridColor
			if m == 1 {
				stroke = "#bbb"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(v), t, x(v), h-bottom, stroke)
			if m == 1 { // labels on decades only: they crowd otherwise
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s×</text>`+"\n", x(v), h-bottom+16, axisColor, strconv.FormatFloat(v, 'g', 3, 64))
			}
		}
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", x(1), t-6, x(1), h-bottom, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">goroutine ÷ vthread (time per operation; bytes per parked unit)</text>`+"\n", l+plotWidth/2, h-12, ink)
	for i, bar := range bars {
		y := t + rowH*i + (rowH-barH)/2
		x0, x1 := x(1), x(bar.ratio())
		color := better
		if x1 < x0 {
			x0, x1, color = x1, x0, worse
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" dy="0.35em" fill="%s">%s</text>`+"\n", labelCol, y+barH/2, ink, esc(bar.label))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n", x0, y, max(x1-x0, 1), barH, color,
			esc(fmt.Sprintf("%s: vthread %s, goroutine %s (%s)", bar.label, fmtVal(bar.vt, bar.unit), fmtVal(bar.gr, bar.unit), bar.unit)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" dy="0.35em" fill="%s">%s×</text>`+"\n", valCol, y+barH/2, ink, strconv.FormatFloat(bar.ratio(), 'f', 2, 64))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// fmtVal formats a median in its unit.
func fmtVal(v float64, unit string) string {
	if unit == "ns/op" {
		return fmtNs(v)
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B"
}
