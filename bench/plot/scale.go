package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The scaling chart (-scale): one benchmark's time per unit against
// GOMAXPROCS (go test's -cpu list, which the scheduler's carriers follow by
// default), one line per impl= sub-benchmark. go test names a result
// Benchmark/impl=I-P, with no -P when P is 1.

// parseScale reads raw benchmark output and collects, for every
// bench/impl=I result, its values in unit by implementation and
// GOMAXPROCS.
func parseScale(r io.Reader, bench, unit string) (*data, error) {
	d := &data{samples: map[key][]float64{}, config: map[string]string{},
		title:  strings.TrimPrefix(bench, "Benchmark") + " scaling: " + unit + " against carriers (GOMAXPROCS)",
		xLabel: "carriers = GOMAXPROCS (go test -cpu)",
		yLabel: unit,
		xName:  "GOMAXPROCS",
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "Benchmark") && !strings.ContainsAny(k, " \t") {
			d.config[k] = strings.TrimSpace(v)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		rest, ok := strings.CutPrefix(f[0], bench+"/impl=")
		if !ok || strings.Contains(rest, "/") {
			continue
		}
		impl, procs := splitProcs(rest)
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] != unit {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			if !slices.Contains(d.impls, impl) {
				d.impls = append(d.impls, impl)
			}
			if !slices.Contains(d.depths, procs) {
				d.depths = append(d.depths, procs)
			}
			k := key{impl, procs}
			d.samples[k] = append(d.samples[k], v)
		}
	}
	slices.Sort(d.depths)
	return d, sc.Err()
}

// splitProcs splits go test's GOMAXPROCS suffix off a sub-benchmark's
// last element: "vthread-16" is vthread at 16, "vthread-unlocked" is
// vthread-unlocked at 1.
func splitProcs(s string) (string, int) {
	if j := strings.LastIndexByte(s, '-'); j > 0 {
		if n, err := strconv.Atoi(s[j+1:]); err == nil && n > 0 {
			return s[:j], n
		}
	}
	return s, 1
}
