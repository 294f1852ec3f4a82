package main

import (
	"encoding/xml"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const sample = `weft-backend: portable (the stack-copying backend is not part of this build yet)
goos: linux
goarch: amd64
pkg: github.com/weftrt/weft/bench
cpu: AMD EPYC
BenchmarkRoundTrip/impl=weft/depth=1-2         	 1000000	       300.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/impl=weft/depth=1-2         	 1000000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/impl=weft/depth=1-2         	 1000000	       200.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/impl=weft/depth=1000-2      	 1000000	       250.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/impl=iter.Pull/depth=1-2    	 1000000	        60.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/impl=iter.Pull/depth=1-2    	 1000000	        80.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoundTrip/impl=iter.Pull/depth=1000   	 1000000	        70.0 ns/op
BenchmarkSuspendedMemory/impl=weft-2           	      30	      2573 B/suspended
BenchmarkGenerator/impl=range-2                	  300000	      3696 ns/op
PASS
`

func TestParse(t *testing.T) {
	d, err := parse(strings.NewReader(sample), "BenchmarkRoundTrip")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.impls, ","); got != "weft,iter.Pull" {
		t.Errorf("impls = %s", got)
	}
	if len(d.depths) != 2 || d.depths[0] != 1 || d.depths[1] != 1000 {
		t.Errorf("depths = %v", d.depths)
	}
	for _, tc := range []struct {
		k    key
		want float64
	}{
		{key{"weft", 1}, 200},        // odd count: the middle one
		{key{"iter.Pull", 1}, 70},    // even count: the mean of the middle two
		{key{"iter.Pull", 1000}, 70}, // no GOMAXPROCS suffix
		{key{"weft", 1000}, 250},
	} {
		if got, ok := d.median(tc.k); !ok || got != tc.want {
			t.Errorf("median(%v) = %v, %v; want %v", tc.k, got, ok, tc.want)
		}
	}
	if _, ok := d.median(key{"goroutine", 1}); ok {
		t.Error("median of a missing key")
	}
	if d.config["cpu"] != "AMD EPYC" || !strings.HasPrefix(d.config["weft-backend"], "portable") {
		t.Errorf("config = %v", d.config)
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want key
		ok   bool
	}{
		{"impl=weft/depth=10-2", key{"weft", 10}, true},
		{"impl=weft.Pull/depth=100", key{"weft.Pull", 100}, true},
		{"depth=7/impl=a-b-16", key{"a-b", 7}, true}, // only the GOMAXPROCS suffix is cut
		{"impl=weft", key{}, false},
		{"impl=weft/depth=x", key{}, false},
		{"weft/depth=1", key{}, false},
	} {
		got, ok := parseName(tc.name)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseName(%q) = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRenderIsWellFormedSVG(t *testing.T) {
	d, err := parse(strings.NewReader(sample), "BenchmarkRoundTrip")
	if err != nil {
		t.Fatal(err)
	}
	svg := render(d)
	dec := xml.NewDecoder(strings.NewReader(svg))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != len(d.impls) {
		t.Errorf("%d lines drawn, want one per impl (%d)", polylines, len(d.impls))
	}
	for _, s := range []string{"weft", "iter.Pull", "AMD EPYC", "weft backend: portable", ">1000<"} {
		if !strings.Contains(svg, s) {
			t.Errorf("chart lacks %q", s)
		}
	}
}

// The recorded results the chart in docs/benchmarks.md was drawn from
// still parse into every impl at every depth.
func TestRecordedResults(t *testing.T) {
	f, err := os.Open("../testdata/both-linux-amd64.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := parse(f, "BenchmarkRoundTrip")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.impls, ","); got != "weft,weft.Pull,iter.Pull,goroutine,weft-portable,weft.Pull-portable,weft-eager,weft.Pull-eager" {
		t.Errorf("impls = %s", got)
	}
	if !slices.Equal(d.depths, []int{1, 10, 100, 1000}) {
		t.Errorf("depths = %v", d.depths)
	}
	// Every impl at every depth has the recording's number of rounds,
	// three or more: compare.sh runs each round whole.
	rounds := len(d.samples[key{d.impls[0], d.depths[0]}])
	if rounds < 3 {
		t.Errorf("%d rounds, want 3 or more", rounds)
	}
	for _, impl := range d.impls {
		for _, dep := range d.depths {
			if n := len(d.samples[key{impl, dep}]); n != rounds {
				t.Errorf("%s at depth %d: %d runs, want %d", impl, dep, n, rounds)
			}
		}
	}
}

func TestKeep(t *testing.T) {
	d, err := parse(strings.NewReader(sample), "BenchmarkRoundTrip")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.keep([]string{"iter.Pull", "weft"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.impls, []string{"iter.Pull", "weft"}) {
		t.Fatalf("impls %v", d.impls)
	}
	if err := d.keep([]string{"goroutine"}); err == nil {
		t.Fatal("keeping an implementation without results succeeded")
	}
}

const schedSample = `weft-backend: stackcopy (the default on linux/amd64)
cpu: AMD EPYC
BenchmarkSkynet/impl=vthread-2     	2	 500000000 ns/op	 450.0 ns/spawn
BenchmarkSkynet/impl=vthread-2     	2	 700000000 ns/op	 630.0 ns/spawn
BenchmarkSkynet/impl=goroutine-2   	2	 900000000 ns/op	 810.0 ns/spawn
BenchmarkParkedMemory/impl=vthread-2   	3	 1000 B/parked	 1200 ns/park
BenchmarkParkedMemory/impl=goroutine-2 	3	 2000 B/parked	 900 ns/park
BenchmarkChanPingPong/impl=vthread-2   	1000	 800.0 ns/op
BenchmarkChanPingPong/impl=goroutine-2 	1000	 200.0 ns/op
BenchmarkPingPong/impl=vthread/carriers=1-2 	1000	 400.0 ns/op
`

func TestSched(t *testing.T) {
	s, err := parseAll(strings.NewReader(schedSample))
	if err != nil {
		t.Fatal(err)
	}
	bars := schedBars(s)
	var got []string
	for _, b := range bars {
		got = append(got, b.label+" "+strconv.FormatFloat(b.ratio(), 'f', 2, 64))
	}
	// PingPong has no goroutine result and is left out; skynet's vthread
	// median is the mean of its two runs.
	want := []string{"skynet, 1.1 M units 1.50", "bytes per parked unit 2.00", "Chan ping-pong 0.25"}
	if !slices.Equal(got, want) {
		t.Fatalf("bars %q, want %q", got, want)
	}
	svg := renderSched(s, bars)
	dec := xml.NewDecoder(strings.NewReader(svg))
	rects := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	if rects != 1+len(bars) { // the background and one per bar
		t.Fatalf("%d rects, want %d", rects, 1+len(bars))
	}
	for _, s := range []string{"0.25×", "2.00×", "#d62728", "#2ca02c"} {
		if !strings.Contains(svg, s) {
			t.Errorf("the chart lacks %q", s)
		}
	}
}

const scaleSample = `cpu: Intel(R) Xeon(R) Processor
BenchmarkSkynet/impl=vthread         	3	 771727536 ns/op	 700.0 ns/spawn	204449312 B/op
BenchmarkSkynet/impl=vthread         	3	 771727536 ns/op	 500.0 ns/spawn	204449312 B/op
BenchmarkSkynet/impl=vthread-16      	3	 371727536 ns/op	 300.0 ns/spawn
BenchmarkSkynet/impl=vthread-unlocked 	3	 681727536 ns/op	 600.0 ns/spawn
BenchmarkSkynet/impl=vthread-unlocked-4 	3	 181727536 ns/op	 160.0 ns/spawn
BenchmarkSkynet/impl=goroutine-4     	3	 681727536 ns/op	 680.0 ns/spawn
BenchmarkSpawn/impl=vthread/from=vthread-4 	1000	 400.0 ns/op
`

// The scaling chart takes GOMAXPROCS from the -cpu suffix, 1 where there
// is none, and keeps an implementation whose name ends in a dash and a
// word.
func TestParseScale(t *testing.T) {
	d, err := parseScale(strings.NewReader(scaleSample), "BenchmarkSkynet", "ns/spawn")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.impls, ","); got != "vthread,vthread-unlocked,goroutine" {
		t.Errorf("impls = %s", got)
	}
	if !slices.Equal(d.depths, []int{1, 4, 16}) {
		t.Errorf("GOMAXPROCS values = %v, want [1 4 16]", d.depths)
	}
	for k, want := range map[key]float64{
		{"vthread", 1}:          600, // the median of 700 and 500
		{"vthread", 16}:         300,
		{"vthread-unlocked", 1}: 600,
		{"vthread-unlocked", 4}: 160,
		{"goroutine", 4}:        680,
	} {
		if got, ok := d.median(k); !ok || got != want {
			t.Errorf("%v: median %v (%v), want %v", k, got, ok, want)
		}
	}
	if _, ok := d.median(key{"goroutine", 1}); ok {
		t.Error("a goroutine result at GOMAXPROCS 1 appeared from nowhere")
	}
	svg := render(d)
	for _, s := range []string{"Skynet scaling", "carriers = GOMAXPROCS", ">16<", "GOMAXPROCS 4: 160 ns"} {
		if !strings.Contains(svg, s) {
			t.Errorf("the chart lacks %q", s)
		}
	}
	if err := xml.NewDecoder(strings.NewReader(svg)).Decode(new(struct{})); err != nil {
		t.Errorf("not well-formed SVG: %v", err)
	}
}

// The recorded 16-core run parses into every implementation at every
// carrier count, three runs each.
func TestRecordedScaling(t *testing.T) {
	f, err := os.Open("../testdata/skynet-scaling-16core.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := parseScale(f, "BenchmarkSkynet", "ns/spawn")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.depths, []int{1, 2, 4, 8, 12, 16}) {
		t.Errorf("GOMAXPROCS values = %v", d.depths)
	}
	if len(d.impls) != 4 {
		t.Errorf("impls = %v, want 4", d.impls)
	}
	for _, impl := range d.impls {
		for _, p := range d.depths {
			if n := len(d.samples[key{impl, p}]); n != 3 {
				t.Errorf("%s at %d: %d runs, want 3", impl, p, n)
			}
		}
	}
}
