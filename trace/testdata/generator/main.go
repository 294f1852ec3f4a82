// Command generator uses weft's continuations and not its scheduler: a
// generator that yields the numbers below -n and a sum of them. The
// tracer's tests trace it to see the scheduler's probes said absent.
package main

import (
	"flag"
	"fmt"

	"github.com/weftrt/weft/continuation"
)

func main() {
	n := flag.Int("n", 1_000_000, "values to generate")
	flag.Parse()
	next, stop := continuation.Pull(func(yield func(int) bool) {
		for i := 0; i < *n; i++ {
			if !yield(i) {
				return
			}
		}
	})
	defer stop()
	sum := 0
	for {
		v, ok := next()
		if !ok {
			break
		}
		sum += v
	}
	fmt.Println("sum", sum)
}
