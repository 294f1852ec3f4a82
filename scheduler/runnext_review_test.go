package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// A continuation that a virtual thread ran and dropped while suspended is
// abandoned by the collector: its deferred calls run on a goroutine that
// Abandon starts. On the portable backend (every -race build, and every
// platform but linux/amd64) Current() there returned, before 1159fc7, the
// virtual thread that last ran it, if that thread was running then, so an
// Unpark there queued with pushOwn on that thread's carrier, from a
// goroutine that is not the carrier's, and the runnext slot was filled by
// several goroutines at once. Current() is nil there now (the Unparks go
// to the global queue); every parked thread must still be woken exactly
// once.
func TestRunNextForeignPushFromAbandonedDefer(t *testing.T) {
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !t.Failed() { // a stranded thread would keep Close waiting
			s.Close()
		}
	}()
	us := scope.New("user")
	const n = 400
	var woke atomic.Int32
	parked := make([]*VThread, n)
	for i := range parked {
		parked[i] = goOrFatal(t, s, func(ctx context.Context) error {
			Park()
			woke.Add(1)
			return nil
		})
	}
	waitUntil(t, "every thread to park", func() bool {
		for _, p := range parked {
			if p.state.Load() != vtParked {
				return false
			}
		}
		return true
	})
	var foreign atomic.Int32
	m := goOrFatal(t, s, func(ctx context.Context) error {
		me := Current()
		func() {
			for _, p := range parked {
				k := continuation.New(us, func() {
					defer func() {
						if Current() == me {
							foreign.Add(1)
						}
						p.Unpark()
					}()
					continuation.Yield(us)
				})
				k.Run() // suspended, and dropped
			}
		}()
		// Runs on its carrier while the collector abandons them.
		for deadline := time.Now().Add(3 * time.Second); woke.Load() < n && time.Now().Before(deadline); {
			runtime.GC()
		}
		return nil
	})
	if err := joinWithin(t, m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for woke.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d of %d Unparks ran where Current() was the running thread on another goroutine", foreign.Load(), n)
	if got := woke.Load(); got != n {
		var b []byte
		for _, c := range s.carriers {
			c.mu.Lock()
			b = fmt.Appendf(b, "carrier %d queue=%d rn=%#x runnext=%v\n", c.id, len(c.queue)-c.head, c.rn.Load(), c.runnext)
			c.mu.Unlock()
		}
		stranded := 0
		for _, p := range parked {
			if p.state.Load() == vtQueued {
				stranded++
			}
		}
		t.Fatalf("%d of %d parked threads ran after their Unpark; %d stranded queued\n%s", got, n, stranded, b)
	}
}

// TestRunNextContended is TestRunNextThieves with thieves that spin on rn
// and steal only while something is queued, and an owner that dawdles
// between its push and its take, so that most takes race a thief: the
// pop/unqueue compare-and-swap against the thief's rnTaking, moveRunnext
// against a thief waiting for the lock, and pushOwn's fast path right after
// a thief's store of rnNone. Every thread is taken exactly once.
func TestRunNextContended(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	c := newCarrier(&Scheduler{}, 0, false)
	p := newRunNextPool(n)
	stop := make(chan struct{})
	var stolen, stolenSlot atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i%64 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				r := c.rn.Load()
				if r == rnNone {
					if i%16 == 0 {
						runtime.Gosched() // one CPU: let the owner on
					}
					continue
				}
				if vt := c.steal(); vt != nil {
					stolen.Add(1)
					if r != rnQueue {
						stolenSlot.Add(1)
					}
					p.take(vt)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 8))
	spin := func(k int) {
		for range k {
			if rng.IntN(4096) == 0 {
				runtime.Gosched()
			}
		}
	}
	p.drive(c, rng, 4, 4, spin)
	close(stop)
	wg.Wait()
	p.finish(t, c)
	t.Logf("thieves took %d of %d threads, %d of them from runnext", stolen.Load(), n, stolenSlot.Load())
}

// TestRunNextSpawnJoinSteal runs spawn-and-join chains and channel
// hand-offs on every carrier at once, so that runnext is filled and taken
// by its carrier (pop, and unqueue in a nested Join on the stack-copying
// backend) while other carriers, idle for want of work, steal it: every
// child runs exactly once, and every Join and hand-off returns.
func TestRunNextSpawnJoinSteal(t *testing.T) {
	s, err := New(Options{Carriers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const workers = 8
	rounds := 20000
	if raceEnabled {
		rounds = 4000 // each thread costs the detector ~5 KB for good (docs/limitations.md)
	}
	var ran atomic.Int64
	var started atomic.Int64
	ws := make([]*VThread, 0, workers+2)
	for w := range workers {
		ws = append(ws, goOrFatal(t, s, func(ctx context.Context) error {
			for i := range rounds {
				started.Add(1)
				x, err := s.Go(func(ctx context.Context) error {
					ran.Add(1)
					if (i+w)%7 == 0 {
						Yield()
					}
					return nil
				})
				if err != nil {
					return err
				}
				if i%5 == 0 {
					runtime.Gosched() // the slot sits full a while
				}
				if err := x.Join(); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	// A ping-pong pair: each hand-off queues the partner into runnext.
	ping, pong := NewChan[int](0), NewChan[int](0)
	ws = append(ws, goOrFatal(t, s, func(ctx context.Context) error {
		for i := range rounds {
			ping.Send(i)
			if v, _ := pong.Recv(); v != i {
				return fmt.Errorf("pong %d, want %d", v, i)
			}
		}
		ping.Close()
		return nil
	}), goOrFatal(t, s, func(ctx context.Context) error {
		for v, ok := ping.Recv(); ok; v, ok = ping.Recv() {
			pong.Send(v)
		}
		return nil
	}))
	done := make(chan struct{})
	errs := make([]error, len(ws))
	go func() {
		for i, w := range ws {
			errs[i] = w.Join()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("stuck: %d of %d children ran", ran.Load(), started.Load())
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("%v: %v", ws[i], err)
		}
	}
	if ran.Load() != started.Load() {
		t.Fatalf("%d children ran, %d started", ran.Load(), started.Load())
	}
}
