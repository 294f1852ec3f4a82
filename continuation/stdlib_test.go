package continuation_test

// Yields through standard-library frames: the body calls into the standard
// library, which calls back into code that yields. The continuation is
// suspended with the library's frames on it and resumed into them.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// chunkFeed is a pipe between a driver and a body: the body's reader yields
// whenever it has nothing to return, and the driver supplies the next chunk
// between Runs.
type chunkFeed struct {
	s       *scope.Scope
	pending []byte
	eof     bool
	reads   int // Read calls
	yields  int // yields made by Read
}

// Read yields until the driver has put data in pending (or closed the chunkFeed).
func (f *chunkFeed) Read(p []byte) (int, error) {
	f.reads++
	for len(f.pending) == 0 && !f.eof {
		f.yields++
		if !continuation.Yield(f.s) {
			panic("Yield returned false")
		}
	}
	if len(f.pending) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// splitChunks splits data into pieces of pseudo-random sizes from 1 to max.
func splitChunks(data []byte, max int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	var out [][]byte
	for len(data) > 0 {
		n := min(1+r.IntN(max), len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// feedBody runs body in a continuation reading from a chunkFeed that gets data
// in the given splitChunks, one chunk per suspension, and then EOF. It returns
// the chunkFeed for its counters.
func feedBody(t *testing.T, run runner, data []byte, max int, body func(r io.Reader)) *chunkFeed {
	t.Helper()
	f := &chunkFeed{s: scope.New("feed")}
	c := continuation.New(f.s, func() { body(f) })
	pieces := splitChunks(data, max, uint64(len(data)))
	i := 0
	runToEnd(c, run, func() {
		if len(f.pending) != 0 {
			t.Fatalf("suspended with %d bytes unread", len(f.pending))
		}
		if i < len(pieces) {
			f.pending = pieces[i]
			i++
		} else {
			f.eof = true
		}
	})
	if i != len(pieces) {
		t.Fatalf("the body stopped reading after %d of %d chunks", i, len(pieces))
	}
	if f.yields < len(pieces) {
		t.Fatalf("%d yields for %d chunks", f.yields, len(pieces))
	}
	return f
}

// ---------------------------------------------------------------------------
// Sorting: a comparison function that yields on every call.

type yieldingSort struct {
	s     *scope.Scope
	xs    []int
	calls int
}

func (y *yieldingSort) Len() int      { return len(y.xs) }
func (y *yieldingSort) Swap(i, j int) { y.xs[i], y.xs[j] = y.xs[j], y.xs[i] }
func (y *yieldingSort) Less(i, j int) bool {
	y.calls++
	continuation.Yield(y.s)
	return y.xs[i] < y.xs[j]
}

func TestYieldInSort(t *testing.T) {
	type sorter struct {
		name   string
		stable bool
		sort   func(s *scope.Scope, xs []int, calls *int)
	}
	less := func(s *scope.Scope, calls *int, a, b int) bool {
		*calls++
		if !continuation.Yield(s) {
			panic("Yield returned false")
		}
		return a < b
	}
	sorters := []sorter{
		{"sort.Slice", false, func(s *scope.Scope, xs []int, calls *int) {
			sort.Slice(xs, func(i, j int) bool { return less(s, calls, xs[i], xs[j]) })
		}},
		{"sort.SliceStable", true, func(s *scope.Scope, xs []int, calls *int) {
			sort.SliceStable(xs, func(i, j int) bool { return less(s, calls, xs[i]/4, xs[j]/4) })
		}},
		{"sort.Sort", false, func(s *scope.Scope, xs []int, calls *int) {
			y := &yieldingSort{s: s, xs: xs}
			sort.Sort(y)
			*calls = y.calls
		}},
		{"slices.SortFunc", false, func(s *scope.Scope, xs []int, calls *int) {
			slices.SortFunc(xs, func(a, b int) int {
				if less(s, calls, a, b) {
					return -1
				}
				if a == b {
					return 0
				}
				return 1
			})
		}},
		{"slices.SortStableFunc", true, func(s *scope.Scope, xs []int, calls *int) {
			slices.SortStableFunc(xs, func(a, b int) int {
				*calls++
				continuation.Yield(s)
				return a/4 - b/4
			})
		}},
	}
	for _, so := range sorters {
		for _, n := range []int{1, 2, 10, 1000} {
			t.Run(so.name+"/"+strconv.Itoa(n), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(n), 2))
				xs := make([]int, n)
				for i := range xs {
					xs[i] = r.IntN(n * 2)
				}
				want := slices.Clone(xs)
				if so.stable {
					slices.SortStableFunc(want, func(a, b int) int { return a/4 - b/4 })
				} else {
					slices.Sort(want)
				}
				s := scope.New("sort")
				calls := 0
				c := continuation.New(s, func() { so.sort(s, xs, &calls) })
				suspensions := 0
				runToEnd(c, sameGoroutine, func() {
					if suspensions++; suspensions%256 == 0 {
						runtime.GC()
					}
				})
				if suspensions != calls || (n > 1 && calls == 0) {
					t.Fatalf("%d suspensions for %d comparisons", suspensions, calls)
				}
				if !slices.Equal(xs, want) {
					t.Fatalf("not sorted correctly:\n%v\nwant\n%v", xs, want)
				}
			})
		}
	}
}

func TestYieldInSortDrivers(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			run := d.new(t)
			s := scope.New("sort")
			xs := rand.New(rand.NewPCG(3, 3)).Perm(300)
			c := continuation.New(s, func() {
				sort.Slice(xs, func(i, j int) bool {
					continuation.Yield(s)
					return xs[i] < xs[j]
				})
			})
			if runToEnd(c, run, nil) == 0 {
				t.Fatal("no comparisons yielded")
			}
			for i, x := range xs {
				if x != i {
					t.Fatalf("xs[%d] = %d after sorting a permutation", i, x)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Other callbacks.

func TestYieldInOtherCallbacks(t *testing.T) {
	const text = "the quick brown fox jumps over the lazy dog"
	cases := []struct {
		name string
		f    func(y func()) string
	}{
		{"strings.Map", func(y func()) string {
			return strings.Map(func(r rune) rune { y(); return unicode.ToUpper(r) }, text)
		}},
		{"strings.FieldsFunc", func(y func()) string {
			return strings.Join(strings.FieldsFunc(text, func(r rune) bool { y(); return r == 'o' }), "|")
		}},
		{"slices.IndexFunc", func(y func()) string {
			return strconv.Itoa(slices.IndexFunc([]byte(text), func(b byte) bool { y(); return b == 'z' }))
		}},
		{"sort.Search", func(y func()) string {
			return strconv.Itoa(sort.Search(1000, func(i int) bool { y(); return i*i >= 500_000 }))
		}},
		{"range over slices.Values", func(y func()) string {
			var b strings.Builder
			for w := range slices.Values(strings.Fields(text)) {
				y()
				b.WriteString(w[:1])
			}
			return b.String()
		}},
		{"range over strings.SplitSeq", func(y func()) string {
			n := 0
			for w := range strings.SplitSeq(text, " ") {
				y()
				n += len(w)
			}
			return strconv.Itoa(n)
		}},
		{"bytes.TrimFunc", func(y func()) string {
			return string(bytes.TrimFunc([]byte("  "+text+"  "), func(r rune) bool { y(); return r == ' ' || r == 't' }))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plainCalls := 0
			want := tc.f(func() { plainCalls++ })
			s := scope.New("callback")
			var got string
			c := continuation.New(s, func() { got = tc.f(func() { continuation.Yield(s) }) })
			n := runToEnd(c, sameGoroutine, runtime.GC)
			if got != want || n != plainCalls || n == 0 {
				t.Fatalf("got %q after %d suspensions, want %q after %d", got, n, want, plainCalls)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Readers: bufio.Scanner, encoding/xml, encoding/json.

func TestYieldInScanner(t *testing.T) {
	var lines []string
	for i := 0; i < 500; i++ {
		lines = append(lines, strings.Repeat(strconv.Itoa(i), i%17))
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	for _, d := range drivers {
		for _, max := range []int{1, 7, 100, 5000} {
			t.Run(d.name+"/chunk="+strconv.Itoa(max), func(t *testing.T) {
				var got []string
				var scanErr error
				feedBody(t, d.new(t), data, max, func(r io.Reader) {
					sc := bufio.NewScanner(r)
					sc.Buffer(make([]byte, 16), 1<<20)
					for sc.Scan() {
						got = append(got, sc.Text())
					}
					scanErr = sc.Err()
				})
				if scanErr != nil || !slices.Equal(got, lines) {
					t.Fatalf("scanned %d lines (err %v), want %d; first difference at %d", len(got), scanErr, len(lines),
						firstMismatch(got, lines))
				}
			})
		}
	}
}

func TestYieldInScannerWords(t *testing.T) {
	data := []byte("alpha beta\tgamma\n\ndelta  epsilon zeta eta theta")
	var got []string
	feedBody(t, sameGoroutine, data, 3, func(r io.Reader) {
		sc := bufio.NewScanner(r)
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
	})
	if want := strings.Fields(string(data)); !slices.Equal(got, want) {
		t.Fatalf("words %q, want %q", got, want)
	}
}

func firstMismatch[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

type xmlItem struct {
	ID    int      `xml:"id,attr"`
	Name  string   `xml:"name"`
	Tags  []string `xml:"tag"`
	Price float64  `xml:"price"`
}

type xmlCatalog struct {
	XMLName xml.Name  `xml:"catalog"`
	Owner   string    `xml:"owner,attr"`
	Items   []xmlItem `xml:"item"`
	Note    string    `xml:",comment"`
}

func xmlDocument() []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<catalog owner="weft &amp; co"><!-- a comment -->` + "\n")
	for i := 0; i < 60; i++ {
		b.WriteString(`  <item id="` + strconv.Itoa(i) + `"><name>item &lt;` + strconv.Itoa(i) + `&gt;</name>`)
		for j := 0; j < i%4; j++ {
			b.WriteString(`<tag>t` + strconv.Itoa(j) + `</tag>`)
		}
		b.WriteString(`<price>` + strconv.FormatFloat(float64(i)*1.25, 'f', -1, 64) + `</price><![CDATA[raw <data>]]></item>` + "\n")
	}
	b.WriteString("</catalog>\n")
	return []byte(b.String())
}

func xmlTokens(r io.Reader) ([]xml.Token, error) {
	dec := xml.NewDecoder(r)
	var toks []xml.Token
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return toks, nil
		}
		if err != nil {
			return toks, err
		}
		toks = append(toks, xml.CopyToken(tok))
	}
}

func TestYieldInXMLDecoder(t *testing.T) {
	doc := xmlDocument()
	want, err := xmlTokens(bytes.NewReader(doc))
	if err != nil || len(want) < 100 {
		t.Fatalf("plain decode: %d tokens, %v", len(want), err)
	}
	for _, d := range drivers {
		for _, max := range []int{1, 13, 4096} {
			t.Run(d.name+"/chunk="+strconv.Itoa(max), func(t *testing.T) {
				var got []xml.Token
				var err error
				feedBody(t, d.new(t), doc, max, func(r io.Reader) { got, err = xmlTokens(r) })
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("%d tokens (err %v), want %d; first difference at %d", len(got), err, len(want),
						firstMismatchDeep(got, want))
				}
			})
		}
	}
}

func firstMismatchDeep[T any](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestYieldInXMLDecode(t *testing.T) {
	doc := xmlDocument()
	var want xmlCatalog
	if err := xml.Unmarshal(doc, &want); err != nil || len(want.Items) != 60 || want.Owner != "weft & co" {
		t.Fatalf("plain Unmarshal: %v, %d items, owner %q", err, len(want.Items), want.Owner)
	}
	for _, max := range []int{1, 64} {
		t.Run("chunk="+strconv.Itoa(max), func(t *testing.T) {
			var got xmlCatalog
			var err error
			// Decode stops reading at the end of the root element.
			feedBody(t, sameGoroutine, bytes.TrimSpace(doc), max, func(r io.Reader) {
				err = xml.NewDecoder(r).Decode(&got)
			})
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("Decode: %v\n%+v\nwant\n%+v", err, got, want)
			}
		})
	}
}

type jsonRecord struct {
	ID     int               `json:"id"`
	Name   string            `json:"name"`
	Scores []float64         `json:"scores"`
	Attrs  map[string]string `json:"attrs"`
	Next   *jsonRecord       `json:"next,omitempty"`
	Any    any               `json:"any"`
}

func TestYieldInJSONDecoder(t *testing.T) {
	var records []jsonRecord
	var stream bytes.Buffer
	enc := json.NewEncoder(&stream)
	for i := 0; i < 80; i++ {
		rec := jsonRecord{ID: i, Name: "rec \"" + strconv.Itoa(i) + "\" \u00e9", Scores: []float64{float64(i) / 3, -1},
			Attrs: map[string]string{"k" + strconv.Itoa(i%5): strings.Repeat("v", i)}, Any: []any{float64(i), "x", nil}}
		if i%3 == 0 {
			rec.Next = &jsonRecord{ID: -i, Name: "child", Any: map[string]any{"deep": true}}
		}
		records = append(records, rec)
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	// What a plain Decoder reads back (floats round-trip exactly).
	var want []jsonRecord
	dec := json.NewDecoder(bytes.NewReader(stream.Bytes()))
	for dec.More() {
		var r jsonRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if len(want) != len(records) || want[3].Next.Name != "child" {
		t.Fatalf("plain decode: %d records", len(want))
	}
	for _, d := range drivers {
		for _, max := range []int{1, 37, 10_000} {
			t.Run(d.name+"/chunk="+strconv.Itoa(max), func(t *testing.T) {
				var got []jsonRecord
				var err error
				feedBody(t, d.new(t), stream.Bytes(), max, func(r io.Reader) {
					dec := json.NewDecoder(r)
					for {
						var rec jsonRecord
						if err = dec.Decode(&rec); err != nil {
							if err == io.EOF {
								err = nil
							}
							return
						}
						got = append(got, rec)
					}
				})
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("decoded %d records (err %v), want %d; first difference at %d", len(got), err, len(want),
						firstMismatchDeep(got, want))
				}
			})
		}
	}
}

func TestYieldInJSONTokens(t *testing.T) {
	doc := []byte(`{"a": [1, 2.5, "three", {"b": null, "c": [true, false]}], "d": {"e": "f"}}`)
	tokens := func(r io.Reader) ([]json.Token, error) {
		dec := json.NewDecoder(r)
		var out []json.Token
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, tok)
		}
	}
	want, err := tokens(bytes.NewReader(doc))
	if err != nil || len(want) != 22 {
		t.Fatalf("plain: %d tokens, %v", len(want), err)
	}
	var got []json.Token
	feedBody(t, sameGoroutine, doc, 2, func(r io.Reader) { got, err = tokens(r) })
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("tokens %v (err %v), want %v", got, err, want)
	}
}

// ---------------------------------------------------------------------------
// io.Copy between a yielding reader and a yielding writer.

// chunkSink is a writer that hands every write to the driver: it yields after
// storing the data, and the driver takes it.
type chunkSink struct {
	s      *scope.Scope
	last   []byte
	writes int
}

func (w *chunkSink) Write(p []byte) (int, error) {
	w.writes++
	w.last = p
	continuation.Yield(w.s)
	return len(p), nil
}

func TestYieldInIOCopy(t *testing.T) {
	data := make([]byte, 200_000)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			run := d.new(t)
			s := scope.New("copy")
			src := &chunkFeed{s: s}
			dst := &chunkSink{s: s}
			var n int64
			var err error
			c := continuation.New(s, func() { n, err = io.Copy(dst, src) })
			pieces := splitChunks(data, 3000, 4)
			var out bytes.Buffer
			next := 0
			writes := 0
			runToEnd(c, run, func() {
				if dst.last != nil { // the body yielded in Write
					out.Write(dst.last)
					dst.last = nil
					writes++
					return
				}
				// the body yielded in Read
				if next < len(pieces) {
					src.pending = pieces[next]
					next++
				} else {
					src.eof = true
				}
			})
			if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("copied %d bytes (err %v), out %d bytes, want %d", n, err, out.Len(), len(data))
			}
			if writes != dst.writes || writes < len(pieces) || next != len(pieces) {
				t.Fatalf("%d writes seen, %d made, %d of %d splitChunks read", writes, dst.writes, next, len(pieces))
			}
		})
	}
}

// TestYieldInIOPipeline: a bufio.Reader and a bufio.Writer stacked on the
// yielding ends, with io.CopyN, io.ReadFull and a line-oriented transform.
func TestYieldInIOPipeline(t *testing.T) {
	var in strings.Builder
	for i := 0; i < 300; i++ {
		in.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	s := scope.New("pipeline")
	src := &chunkFeed{s: s}
	dst := &chunkSink{s: s}
	var err error
	c := continuation.New(s, func() {
		br := bufio.NewReaderSize(src, 16)
		bw := bufio.NewWriterSize(dst, 32)
		header := make([]byte, 5)
		if _, err = io.ReadFull(br, header); err != nil {
			return
		}
		bw.Write(bytes.ToUpper(header))
		for {
			line, rerr := br.ReadString('\n')
			bw.WriteString(strings.ToUpper(line))
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				err = rerr
				return
			}
		}
		err = bw.Flush()
	})
	pieces := splitChunks([]byte(in.String()), 11, 5)
	var out bytes.Buffer
	next := 0
	runToEnd(c, sameGoroutine, func() {
		if dst.last != nil {
			out.Write(dst.last)
			dst.last = nil
			return
		}
		if next < len(pieces) {
			src.pending = pieces[next]
			next++
		} else {
			src.eof = true
		}
	})
	if err != nil || out.String() != strings.ToUpper(in.String()) {
		t.Fatalf("err %v; output %d bytes, want %d", err, out.Len(), in.Len())
	}
}
