package continuation_test

import (
	"encoding/xml"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

func ExamplePull() {
	next, stop := continuation.Pull(slices.Values([]string{"a", "b", "c"}))
	defer stop()
	for v, ok := next(); ok; v, ok = next() {
		fmt.Print(v, " ")
	}
	fmt.Println()
	// Output: a b c
}

func ExamplePull2() {
	ages := map[string]int{"ada": 36, "alan": 41}
	next, stop := continuation.Pull2(maps.All(ages))
	defer stop()
	total := 0
	for _, age, ok := next(); ok; _, age, ok = next() {
		total += age
	}
	fmt.Println(total)
	// Output: 77
}

func ExampleNewCoroutine() {
	// A running total: each Resume adds its argument and gets the sum back;
	// a negative argument ends the coroutine, whose result is the last sum.
	co := continuation.NewCoroutine(func(in int, yield func(int) int) int {
		sum := 0
		for in >= 0 {
			sum += in
			in = yield(sum)
		}
		return sum
	})
	fmt.Println(co.Resume(1), co.Resume(2), co.IsDone())
	fmt.Println(co.Resume(-1), co.IsDone())
	// Output:
	// 1 3 false
	// 3 true
}

// The SAX-parser inversion of Stadler et al.: a push-style XML walk runs
// inside a coroutine and hands out one element name per Resume.
func ExampleNewCoroutine_sax() {
	const doc = `<a><b/><c><d/></c></a>`
	parser := continuation.NewCoroutine(func(_ struct{}, yield func(string) struct{}) string {
		d := xml.NewDecoder(strings.NewReader(doc))
		for {
			tok, err := d.Token()
			if err != nil {
				return "" // end of document
			}
			if el, ok := tok.(xml.StartElement); ok {
				yield(el.Name.Local)
			}
		}
	})
	for {
		name := parser.Resume(struct{}{})
		if parser.IsDone() {
			break
		}
		fmt.Print(name, " ")
	}
	fmt.Println()
	// Output: a b c d
}

func ExampleWithOnPinned() {
	s := scope.New("worker")
	c := continuation.New(s, func() {
		pinning.Do(func() {
			// Inside a critical section the yield is pinned: the handler
			// runs, Yield returns false, and the body carries on.
			fmt.Println("suspended:", continuation.Yield(s))
		})
		fmt.Println("suspended:", continuation.Yield(s))
	}, continuation.WithOnPinned(func(c *continuation.Continuation, r pinning.Reason) {
		fmt.Println("pinned:", r)
	}))
	c.Run()
	c.Run()
	fmt.Println("done:", c.IsDone())
	// Output:
	// pinned: critical section (pinning.Do)
	// suspended: false
	// suspended: true
	// done: true
}
