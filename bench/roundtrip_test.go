package bench

import (
	"iter"
	"sync"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// This file builds the peers the benchmarks compare. Each one runs a body
// that recurses to a given depth and then suspends in a loop; the driver
// resumes it once per round trip. The benchmarks and the tests that check
// them share these constructors.

// recurse calls f from under depth frames of itself (depth < 1 counts
// as 1). It must not be inlined, or the frames would not exist.
//
//go:noinline
func recurse(depth int, f func()) {
	if depth <= 1 {
		f()
		return
	}
	recurse(depth-1, f)
}

// peer is one implementation, set up and suspended at its depth.
type peer struct {
	// run performs n round trips, each resuming the body and returning
	// when it has suspended again. The loop is written out per peer so
	// that a round trip costs no indirect call beyond the peer's own.
	run func(n int)
	// close ends the body, waits for any goroutine it ran on to finish,
	// and returns how many times the body suspended, the first suspension
	// (made while setting up) included.
	close func() int
}

// A newPeer function sets a peer up: it starts the body, which recurses
// to depth, calls probe (if not nil) at the bottom, and suspends there.
type newPeer func(depth int, probe func()) peer

// peers are the round-trip implementations, in the order reported.
var peers = []struct {
	name string
	new  newPeer
}{
	{"weft", newWeft},
	{"weft.Pull", newWeftPull},
	{"iter.Pull", newIterPull},
	{"goroutine", newGoroutine},
}

// newWeft: a weft continuation whose body loops on continuation.Yield,
// resumed with Run.
func newWeft(depth int, probe func()) peer {
	s := scope.New("bench")
	stop := false
	yields := 0
	c := continuation.New(s, func() {
		recurse(depth, func() {
			if probe != nil {
				probe()
			}
			for !stop {
				yields++
				continuation.Yield(s)
			}
		})
	})
	c.Run()
	return weftPeer(c, &stop, &yields)
}

// weftPeer drives c, suspended once, with Run. Setting *stop must end
// c's body at its next resume; *yields counts its suspensions. Every weft
// continuation peer in this package is driven this way.
func weftPeer(c *continuation.Continuation, stop *bool, yields *int) peer {
	return peer{
		run: func(n int) {
			for range n {
				c.Run()
			}
		},
		close: func() int {
			*stop = true
			c.Run()
			if !c.IsDone() {
				panic("bench: weft continuation did not finish")
			}
			return *yields
		},
	}
}

// nextPeer drives a pull iterator's next and stop, next called once.
// stop must end the sequence; *yields counts its suspensions. Every pull
// iterator peer in this package is driven this way.
func nextPeer[V any](next func() (V, bool), stop func(), yields *int) peer {
	return peer{
		run: func(n int) {
			for range n {
				next()
			}
		},
		close: func() int {
			stop()
			return *yields
		},
	}
}

// measure times p.run(b.N), then checks that the body suspended once per
// op, besides the suspension made while setting up.
func (p peer) measure(b *testing.B) {
	b.ResetTimer()
	p.run(b.N)
	b.StopTimer()
	if got := p.close(); got != b.N+1 {
		b.Fatalf("body suspended %d times, want %d", got, b.N+1)
	}
}

// loopSeq is a sequence that recurses to depth and yields 0, 1, 2, ...
// until it is stopped; it counts its yields in *yields.
func loopSeq(depth int, probe func(), yields *int) iter.Seq[int] {
	return func(yield func(int) bool) {
		recurse(depth, func() {
			if probe != nil {
				probe()
			}
			for i := 0; ; i++ {
				*yields++
				if !yield(i) {
					return
				}
			}
		})
	}
}

// pullPeer drives a pull iterator over loopSeq.
func pullPeer(pull func(iter.Seq[int]) (func() (int, bool), func()), depth int, probe func()) peer {
	yields := 0
	next, stop := pull(loopSeq(depth, probe, &yields))
	next()
	return nextPeer(next, stop, &yields)
}

// newWeftPull: continuation.Pull, resumed with next.
func newWeftPull(depth int, probe func()) peer {
	return pullPeer(continuation.Pull[int], depth, probe)
}

// newIterPull: iter.Pull, resumed with next.
func newIterPull(depth int, probe func()) peer {
	return pullPeer(iter.Pull[int], depth, probe)
}

// newGoroutine: a goroutine that answers each message on ping with one on
// pong; both channels are unbuffered.
func newGoroutine(depth int, probe func()) peer {
	ping := make(chan struct{})
	pong := make(chan struct{})
	yields := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		recurse(depth, func() {
			if probe != nil {
				probe()
			}
			yields++
			pong <- struct{}{}
			for range ping {
				yields++
				pong <- struct{}{}
			}
		})
	}()
	<-pong
	return peer{
		run: func(n int) {
			for range n {
				ping <- struct{}{}
				<-pong
			}
		},
		close: func() int {
			close(ping)
			wg.Wait()
			return yields
		},
	}
}
