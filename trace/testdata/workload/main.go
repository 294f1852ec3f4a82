// Command workload runs a known mix of weft events for the tracer's tests:
// -yields yields of one continuation, -pins yields pinned inside
// pinning.Do at one site (pinSite), and -parks virtual-thread parks
// pinned the same way (parkSite), each unparked by another virtual
// thread. It waits for a line on standard input before it starts, so
// that a tracer can attach first, and prints what it did.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/scope"
)

func main() {
	yields := flag.Int("yields", 1000, "yields that suspend")
	pins := flag.Int("pins", 7, "yields pinned by pinning.Do, at pinSite")
	parks := flag.Int("parks", 3, "virtual-thread parks pinned by pinning.Do, at parkSite")
	wait := flag.Bool("wait", false, "wait for a line on standard input before starting")
	timed := flag.Bool("time", false, "print the time per yield round trip and per pinned yield to standard error")
	flag.Parse()
	if *wait {
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
	}

	s := scope.New("workload")
	pinned := 0
	var start, pinStart time.Time
	c := continuation.New(s, func() {
		for i := 0; i < *yields; i++ {
			continuation.Yield(s)
		}
		pinStart = time.Now()
		for i := 0; i < *pins; i++ {
			pinSite(s)
		}
	}, continuation.WithOnPinned(func(*continuation.Continuation, pinning.Reason) { pinned++ }))
	runs := 0
	start = time.Now()
	for !c.IsDone() {
		c.Run()
		runs++
	}
	end := time.Now()
	fmt.Printf("continuation: %d runs, %d pinned yields\n", runs, pinned)
	if *timed {
		fmt.Fprintf(os.Stderr, "yield round trip: %v; pinned yield: %v\n",
			pinStart.Sub(start)/time.Duration(max(*yields, 1)), end.Sub(pinStart)/time.Duration(max(*pins, 1)))
	}

	sch, err := scheduler.New(scheduler.Options{Carriers: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var woken atomic.Int64
	for i := 0; i < *parks; i++ {
		var parked atomic.Bool
		vt, _ := sch.Go(func(context.Context) error {
			parkSite(&parked)
			woken.Add(1)
			return nil
		})
		waker, _ := sch.Go(func(context.Context) error {
			for !parked.Load() {
				scheduler.Yield()
			}
			vt.Unpark()
			return nil
		})
		vt.Join()
		waker.Join()
	}
	sch.Close()
	fmt.Printf("scheduler: %d pinned parks woken\n", woken.Load())
	for _, p := range sch.Pins() {
		fmt.Printf("pin: %s at %s x%d\n", p.Reason, p.Function, p.Count)
	}
}

// pinSite yields inside a critical section, which pins the yield.
//
//go:noinline
func pinSite(s *scope.Scope) {
	pinning.Do(func() { continuation.Yield(s) })
}

// parkSite parks inside a critical section, which blocks the carrier.
//
//go:noinline
func parkSite(parked *atomic.Bool) {
	pinning.Do(func() {
		parked.Store(true)
		scheduler.Park()
	})
}
