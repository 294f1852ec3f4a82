package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Fairness: a carrier whose own queue never empties must still run the
// global queue and the oldest of its own queue. Two virtual threads that
// hand a value back and forth over Chans refill their carrier's queue at
// every pick; before next's fairness rule, whatever waited in the global
// queue (a Sleep's timer wake-up, a Yield, a Go from a plain goroutine) or
// beneath the pair in the carrier's own queue never ran.

// fairnessGiveUp is how long the busy pairs below run at most: a starved
// virtual thread runs once they stop, so a starvation fails the test
// instead of hanging it.
const fairnessGiveUp = 10 * time.Second

// busyPair starts two virtual threads on s that pass a value back and
// forth until stop is set or fairnessGiveUp has passed, and returns a
// function that waits for them and reports whether they were stopped
// rather than gave up. It may be called from a virtual thread.
func busyPair(t *testing.T, s *Scheduler, stop *atomic.Bool) (stopped func() bool) {
	mustGo := func(fn func(ctx context.Context) error) *VThread {
		vt, err := s.Go(fn)
		if err != nil {
			panic(err) // not t.Fatal: this may run in a virtual thread
		}
		return vt
	}
	giveUp := time.Now().Add(fairnessGiveUp)
	ab, ba := NewChan[int](0), NewChan[int](0)
	var byStop atomic.Bool
	a := mustGo(func(ctx context.Context) error {
		for {
			if stop.Load() {
				byStop.Store(true)
				break
			}
			if time.Now().After(giveUp) {
				break
			}
			ab.Send(1)
			ba.Recv()
		}
		ab.Close()
		return nil
	})
	b := mustGo(func(ctx context.Context) error {
		for {
			if _, ok := ab.Recv(); !ok {
				return nil
			}
			ba.Send(1)
		}
	})
	return func() bool {
		joinWithin(t, a)
		joinWithin(t, b)
		return byStop.Load()
	}
}

// TestFairGlobalQueue: with one busy pair on each carrier, a virtual
// thread started from the test's goroutine (the global queue) runs, its
// Sleep's timer wakes it (the global queue again), and one that yields
// (the global queue) goes on.
func TestFairGlobalQueue(t *testing.T) {
	for _, carriers := range []int{1, 2} {
		s := newTest(t, Options{Carriers: carriers})
		var stop atomic.Bool
		var pairs []func() bool
		for range carriers {
			pairs = append(pairs, busyPair(t, s, &stop))
		}
		time.Sleep(10 * time.Millisecond) // the pairs are busy
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			Sleep(time.Millisecond)
			for range 3 {
				Yield()
			}
			stop.Store(true)
			return nil
		})
		joinWithin(t, vt)
		for i, stopped := range pairs {
			if !stopped() {
				t.Errorf("carriers=%d: busy pair %d gave up after %v before a virtual thread that started from a goroutine, slept and yielded three times could stop it: it starved in the global queue", carriers, i, fairnessGiveUp)
			}
		}
	}
}

// TestFairOwnQueue: a virtual thread queued on a carrier beneath a busy
// pair runs. (The carrier takes the newest of its own queue first.)
func TestFairOwnQueue(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	var stop atomic.Bool
	var stopped func() bool
	var first *VThread
	starter := goOrFatal(t, s, func(ctx context.Context) error {
		// Queued on this carrier first, then the pair above it.
		var err error
		first, err = s.Go(func(ctx context.Context) error {
			stop.Store(true)
			return nil
		})
		if err != nil {
			return err
		}
		stopped = busyPair(t, s, &stop)
		return nil
	})
	if err := joinWithin(t, starter); err != nil {
		t.Fatal(err)
	}
	joinWithin(t, first)
	if !stopped() {
		t.Errorf("the busy pair gave up after %v before the virtual thread queued beneath it ran", fairnessGiveUp)
	}
}

// A virtual thread queued beneath the one a fair pick takes is seen by a
// carrier going to sleep meanwhile. The other carrier is held where sleep
// has registered it idle and not yet looked; the first carrier, its queue
// [X, B], takes X by a fair pick (the oldest) and runs it, and X starts
// Z, which blocks that carrier until B runs. The sleeping carrier must
// find B in the first carrier's queue and steal it. With X joining Z, Z
// runs nested in X. (The interleaving is forced with testHooks.)
func TestFairPickSeenBySleeper(t *testing.T) {
	for _, join := range []bool{false, true} {
		if waited, stranded := fairPickWhileSleeping(t, join); stranded {
			t.Errorf("join=%v: the virtual thread beneath the fair pick's waited %v with a carrier asleep", join, waited)
		}
	}
}

func fairPickWhileSleeping(t *testing.T, join bool) (waited time.Duration, stranded bool) {
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		testHooks.sleepBeforeIdle.Store(nil)
		testHooks.sleepBeforeLook.Store(nil)
	}()
	waitUntil(t, "both carriers to sleep", func() bool { return s.nidle.Load() == 2 })
	var other atomic.Pointer[carrier]
	var idleArmed, lookArmed atomic.Bool
	atIdle, queued, inLook, zStarted := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	beforeIdle := func(c *carrier) {
		if c == other.Load() && idleArmed.CompareAndSwap(true, false) {
			close(atIdle)
			<-queued
			lookArmed.Store(true)
		}
	}
	beforeLook := func(c *carrier) {
		if c == other.Load() && lookArmed.CompareAndSwap(true, false) {
			close(inLook)
			<-zStarted // held here, as a preempted carrier would be
		}
	}
	testHooks.sleepBeforeIdle.Store(&beforeIdle)
	testHooks.sleepBeforeLook.Store(&beforeLook)
	bRan, done := make(chan struct{}), make(chan struct{})
	m := goOrFatal(t, s, func(ctx context.Context) error {
		c1 := Current().carrier
		for _, c := range s.carriers {
			if c != c1 {
				other.Store(c)
			}
		}
		idleArmed.Store(true)
		// Wakes the other carrier, which finds nothing and goes to sleep
		// again, into the hooks.
		go s.Go(func(ctx context.Context) error { return nil })
		<-atIdle
		// X, then B, on this carrier's queue; nobody is idle: no wake-up.
		if _, err := s.Go(func(ctx context.Context) error { // X
			z, err := s.Go(func(ctx context.Context) error { // Z
				close(zStarted)
				start := time.Now()
				select { // blocks the carrier, as a system call would
				case <-bRan:
				case <-time.After(2 * time.Second):
					stranded = true
				}
				waited = time.Since(start)
				close(done)
				return nil
			})
			if err == nil && join {
				z.Join()
			}
			return err
		}); err != nil {
			return err
		}
		if _, err := s.Go(func(ctx context.Context) error { close(bRan); return nil }); err != nil { // B
			return err
		}
		c1.picks = fairPicks - 1 // the carrier's next pick is a fair one
		close(queued)
		<-inLook
		return nil
	})
	if err := joinWithin(t, m); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Z never ran")
	}
	return waited, stranded
}

// pipelineCaps are the Chan capacities of the pipelines below, in turn:
// unbuffered hand-offs, one-slot ones, and batches.
var pipelineCaps = []int{0, 1, 4}

// runPipelines starts n pipelines on s, each a producer virtual thread
// sending on its own Chan to its own consumer, from the calling goroutine
// or from a virtual thread, and returns how many values each consumer
// had received when enough said so of the counts (or when fairnessGiveUp
// passed, which the counts then show). It stops and joins them all.
func runPipelines(t *testing.T, s *Scheduler, n int, fromVThread bool, enough func(counts []int64) bool) []int64 {
	t.Helper()
	counts := make([]atomic.Int64, n)
	var stop atomic.Bool
	var vts []*VThread
	start := func() error {
		for i := range n {
			ch := NewChan[int](pipelineCaps[i%len(pipelineCaps)])
			p, err := s.Go(func(ctx context.Context) error {
				for v := 0; !stop.Load(); v++ {
					ch.Send(v)
				}
				ch.Close()
				return nil
			})
			if err != nil {
				return err
			}
			c, err := s.Go(func(ctx context.Context) error {
				for {
					if _, ok := ch.Recv(); !ok {
						return nil
					}
					counts[i].Add(1)
				}
			})
			if err != nil {
				return err
			}
			vts = append(vts, p, c)
		}
		return nil
	}
	if fromVThread {
		starter := goOrFatal(t, s, func(ctx context.Context) error { return start() })
		if err := joinWithin(t, starter); err != nil {
			t.Fatal(err)
		}
	} else if err := start(); err != nil {
		t.Fatal(err)
	}
	giveUp := time.Now().Add(fairnessGiveUp)
	snap := make([]int64, n)
	for {
		for i := range counts {
			snap[i] = counts[i].Load()
		}
		if enough(snap) || time.Now().After(giveUp) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// TestFairPipelines: independent pipelines that hand values over Chans
// all progress, on one carrier, two, GOMAXPROCS and in deterministic mode,
// started from a goroutine or from a virtual thread. Two hand-off
// partners refill their carrier's queue at every pick; without a fair
// pick of the oldest thread of that queue, the threads beneath them never
// ran (one of three pipelines received nothing). On one carrier, each
// pipeline must have 1/20 of the mean count once the total reaches a
// target; on several, each must reach a count.
func TestFairPipelines(t *testing.T) {
	perPipeline := int64(20_000)
	if testing.Short() || raceEnabled {
		perPipeline = 5_000
	}
	// share is the least share of the mean that each pipeline must
	// have, where one carrier runs every pipeline, so that fairness alone
	// sets the shares. Several carriers balance work only when one is
	// idle (it steals): a carrier running one pipeline and another
	// running seven give the first twenty times the share of the others,
	// and how much time each carrier's thread gets is the OS's to decide
	// (four carriers on two loaded CPUs run some pipelines not at all
	// for milliseconds). There (share 0) each pipeline must reach
	// perPipeline/20 values.
	type config struct {
		name  string
		opts  Options
		share int64
	}
	configs := []config{
		{"1", Options{Carriers: 1}, 20},
		{"2", Options{Carriers: 2}, 0},
		{"GOMAXPROCS", Options{}, 0},
		{"deterministic", Options{Deterministic: true, Seed: 7}, 20},
	}
	for _, cfg := range configs {
		for _, n := range []int{3, 8} {
			for _, fromVThread := range []bool{false, true} {
				name := fmt.Sprintf("carriers=%s/pipelines=%d/fromVThread=%v", cfg.name, n, fromVThread)
				t.Run(name, func(t *testing.T) {
					s := boundedSched(t, cfg.opts)
					if cfg.share == 0 {
						least := perPipeline / 20
						counts := runPipelines(t, s, n, fromVThread, func(counts []int64) bool { return slices.Min(counts) >= least })
						for i, c := range counts {
							if c < least {
								t.Errorf("pipeline %d (capacity %d) received %d values in %v, want at least %d; all: %v", i, pipelineCaps[i%len(pipelineCaps)], c, fairnessGiveUp, least, counts)
							}
						}
						return
					}
					target := perPipeline * int64(n)
					counts := runPipelines(t, s, n, fromVThread, func(counts []int64) bool {
						var total int64
						for _, c := range counts {
							total += c
						}
						return total >= target
					})
					var total int64
					for _, c := range counts {
						total += c
					}
					mean := total / int64(n)
					for i, c := range counts {
						if c < mean/cfg.share {
							t.Errorf("pipeline %d (capacity %d) received %d values, want at least %d (1/%d of the mean); all: %v", i, pipelineCaps[i%len(pipelineCaps)], c, mean/cfg.share, cfg.share, counts)
						}
					}
				})
			}
		}
	}
}

// TestFairBound checks the bound fairness.go states: on one carrier, with
// no thread ending, a thread with k threads older than it in the queue
// runs within 2(k+1)·fairPicks picks, whatever a hand-off pair above them
// does. Each queued thread records how many round trips (two picks each)
// the pair had made when it first ran; the threads do not end, so that
// the fair pick never passes over its own oldest. The starter ends once,
// which may cost one fair turn more.
func TestFairBound(t *testing.T) {
	const k = 10
	s := boundedSched(t, Options{Carriers: 1})
	var rounds atomic.Int64
	var stop atomic.Bool
	ran := make([]atomic.Int64, k)
	var queued []*VThread
	var a, b *VThread
	starter := goOrFatal(t, s, func(ctx context.Context) error {
		for i := range k {
			vt, err := s.Go(func(ctx context.Context) error {
				ran[i].Store(rounds.Load() + 1) // +1: 0 means not yet run
				for !stop.Load() {
					Park()
				}
				return nil
			})
			if err != nil {
				return err
			}
			queued = append(queued, vt)
		}
		ab, ba := NewChan[int](0), NewChan[int](0)
		var err error
		if a, err = s.Go(func(ctx context.Context) error {
			for !stop.Load() {
				ab.Send(1)
				ba.Recv()
				rounds.Add(1)
			}
			ab.Close()
			return nil
		}); err != nil {
			return err
		}
		b, err = s.Go(func(ctx context.Context) error {
			for {
				if _, ok := ab.Recv(); !ok {
					return nil
				}
				ba.Send(1)
			}
		})
		return err
	})
	if err := joinWithin(t, starter); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every queued thread to run", func() bool {
		return ran[k-1].Load() != 0 || rounds.Load() > 100*k*fairPicks
	})
	stop.Store(true)
	joinWithin(t, a)
	joinWithin(t, b)
	for _, vt := range queued {
		vt.Unpark()
		joinWithin(t, vt)
	}
	for i := range ran {
		picks := 2 * (ran[i].Load() - 1)
		// i threads are older than queued[i]; one more turn for the
		// starter's end.
		if bound := int64(2*(i+1)*fairPicks + 2*fairPicks); ran[i].Load() == 0 || picks > bound {
			t.Errorf("queued thread %d (%d older) ran after about %d picks of the pair, want at most %d", i, i, picks, bound)
		}
	}
}
