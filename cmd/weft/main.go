// Command weft is a short tour of the weft continuation library:
//
//  1. which backend runs continuations in this process, and why;
//  2. a SAX-style inversion: a callback-driven encoding/xml walk turned
//     into a pull-style generator with continuation.Pull;
//  3. 100,000 continuations suspended at once, their memory per
//     continuation, and all of them resumed to completion;
//  4. virtual threads as go tool pprof sees them: a thread dump, and a
//     CPU profile with whole stacks to open (package vtprof).
//
// Run it with:
//
//	go run ./cmd/weft
package main

import (
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

func main() {
	n := flag.Int("n", 100_000, "number of continuations to suspend at once")
	backendOnly := flag.Bool("backend", false, "print the backend in use, and why, and exit")
	flag.Parse()
	if *backendOnly {
		fmt.Println(continuation.Backend())
		return
	}
	if err := run(os.Stdout, *n); err != nil {
		fmt.Fprintln(os.Stderr, "weft:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, n int) error {
	fmt.Fprintln(w, "weft: delimited continuations for Go")
	fmt.Fprintln(w, "backend:", continuation.Backend())
	fmt.Fprintln(w)
	if err := saxInversion(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := manySuspended(w, n); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return profiled(w)
}

const catalog = `<catalog>
  <book id="1"><title>The Art of Computer Programming</title></book>
  <book id="2"><title>Structure and Interpretation of Computer Programs</title></book>
  <book id="3"><title>Types and Programming Languages</title></book>
</catalog>`

// walkXML is a SAX-style parser: it pushes every element's path and text
// to a callback, and stops early if the callback returns false.
func walkXML(r io.Reader, onElement func(path, text string) bool) error {
	d := xml.NewDecoder(r)
	var stack []string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			text.Reset()
		case xml.CharData:
			text.Write(t)
		case xml.EndElement:
			if !onElement(strings.Join(stack, "/"), strings.TrimSpace(text.String())) {
				return nil
			}
			stack = stack[:len(stack)-1]
			text.Reset()
		}
	}
}

// saxInversion turns walkXML's callbacks into a generator: the caller asks
// for the next element when it wants one, while the parser keeps its own
// loop and stack, suspended between calls.
func saxInversion(w io.Writer) error {
	fmt.Fprintln(w, "1. SAX-style inversion: encoding/xml callbacks pulled one at a time")
	var parseErr error
	elements := iter.Seq2[string, string](func(yield func(string, string) bool) {
		parseErr = walkXML(strings.NewReader(catalog), yield)
	})
	next, stop := continuation.Pull2(elements)
	defer stop()
	for i := 1; ; i++ {
		path, text, ok := next()
		if !ok {
			break
		}
		if strings.HasSuffix(path, "/title") {
			fmt.Fprintf(w, "   pulled #%d  %-22s %q\n", i, path, text)
		}
	}
	return parseErr
}

// manySuspended suspends n continuations at once, each a few frames deep
// with live locals, measures the memory they hold, then finishes them all.
func manySuspended(w io.Writer, n int) error {
	fmt.Fprintf(w, "2. %d continuations suspended at once\n", n)
	s := scope.New("demo")
	results := make([]int, n)
	conts := make([]*continuation.Continuation, n)

	before := liveBytes()
	start := time.Now()
	for i := range conts {
		conts[i] = continuation.New(s, func() { results[i] = countdown(s, i, 3) })
		conts[i].Run() // runs until the first yield, three frames down
	}
	created := time.Since(start)
	held := liveBytes() - before
	fmt.Fprintf(w, "   suspended %d in %v: %.0f bytes per suspended continuation (heap + stacks)\n",
		n, created.Round(time.Millisecond), float64(held)/float64(n))

	start = time.Now()
	for _, c := range conts {
		for !c.IsDone() {
			c.Run()
		}
	}
	fmt.Fprintf(w, "   resumed all to completion in %v\n", time.Since(start).Round(time.Millisecond))
	for i, r := range results {
		if want := want(i, 3); r != want {
			return fmt.Errorf("continuation %d computed %d, want %d", i, r, want)
		}
	}
	fmt.Fprintln(w, "   every result checked")
	return nil
}

// countdown recurses depth frames, yielding once in the innermost frame,
// with a local in every frame that stays live across the yield.
func countdown(s *scope.Scope, seed, depth int) int {
	local := seed*31 + depth
	if depth == 1 {
		continuation.Yield(s)
		return local
	}
	return local + countdown(s, seed, depth-1)
}

func want(seed, depth int) int {
	sum := 0
	for d := depth; d >= 1; d-- {
		sum += seed*31 + d
	}
	return sum
}

// liveBytes returns the heap and goroutine-stack bytes in use after a GC.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
