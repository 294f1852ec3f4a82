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
	pingpongs := flag.Int("pingpong", 100, "round trips between two virtual threads over a channel")
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
		vt, _ := sch.Go(func(context.Context) error {
			parkSite()
			woken.Add(1)
			return nil
		})
		waker, _ := sch.Go(func(context.Context) error {
			// The scheduler counts a pinned park before it blocks: an
			// Unpark before that would leave Park nothing to wait for.
			for pinnedParks(sch) <= i {
				scheduler.Yield()
			}
			vt.Unpark()
			return nil
		})
		vt.Join()
		waker.Join()
	}
	pingPong(sch, *pingpongs)
	sch.Close()
	fmt.Printf("scheduler: %d pinned parks woken, %d ping-pongs, 3 sleeps\n", woken.Load(), *pingpongs)
	for _, p := range sch.Pins() {
		fmt.Printf("pin: %s at %s x%d\n", p.Reason, p.Function, p.Count)
	}
}

// pingPong sends n values to a virtual thread that sends each back, over
// unbuffered channels, while another sleeps three times: wake-ups by
// channels and by timers.
func pingPong(sch *scheduler.Scheduler, n int) {
	ping, pong := scheduler.NewChan[int](0), scheduler.NewChan[int](0)
	echo, _ := sch.Go(func(context.Context) error {
		for v := range n {
			got, _ := ping.Recv()
			if got != v {
				return fmt.Errorf("got %d, want %d", got, v)
			}
			pong.Send(got)
		}
		return nil
	})
	sleeper, _ := sch.Go(func(context.Context) error {
		for range 3 {
			scheduler.Sleep(time.Millisecond)
		}
		return nil
	})
	first, _ := sch.Go(func(context.Context) error {
		for v := range n {
			ping.Send(v)
			pong.Recv()
		}
		return nil
	})
	for _, vt := range []*scheduler.VThread{echo, sleeper, first} {
		if err := vt.Join(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
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
func parkSite() {
	pinning.Do(scheduler.Park)
}

// pinnedParks returns how many parks sch has counted pinned at parkSite.
func pinnedParks(sch *scheduler.Scheduler) int {
	for _, p := range sch.Pins() {
		if p.Function == "main.parkSite" {
			return int(p.Count)
		}
	}
	return 0
}
