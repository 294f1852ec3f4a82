package main

import (
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
	err := scanBench(r, d.config, func(name string, procs int, u string, v float64) {
		impl, ok := strings.CutPrefix(name, bench+"/impl=")
		if !ok || strings.Contains(impl, "/") || u != unit {
			return
		}
		if !slices.Contains(d.impls, impl) {
			d.impls = append(d.impls, impl)
		}
		if !slices.Contains(d.depths, procs) {
			d.depths = append(d.depths, procs)
		}
		k := key{impl, procs}
		d.samples[k] = append(d.samples[k], v)
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(d.depths)
	return d, nil
}

// splitProcs splits go test's GOMAXPROCS suffix off a benchmark's name:
// "BenchmarkSkynet/impl=vthread-16" is impl=vthread at 16,
// "BenchmarkSkynet/impl=vthread-unlocked" is impl=vthread-unlocked at 1.
func splitProcs(s string) (string, int) {
	if j := strings.LastIndexByte(s, '-'); j > 0 {
		if n, err := strconv.Atoi(s[j+1:]); err == nil && n > 0 {
			return s[:j], n
		}
	}
	return s, 1
}
