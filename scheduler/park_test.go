package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/scheduler"
)

// A virtual thread that parks in a loop takes the engine's capture fast
// path from its second park on each call chain: the scheduler's own frames (body, park,
// Park, the wait helpers) hold no stack objects, which would send every
// park of every virtual thread down the general capture. The body is
// outside package scheduler, whose frames the thaw policy counts as the
// engine's.
func TestParkTakesCaptureFastPath(t *testing.T) {
	s := countingScheduler(t, "the capture fast path is")
	const rounds = 50
	var stats weft.Stats
	ch := scheduler.NewChan[int](0)
	var mu scheduler.Mutex
	vt := start(t, s, func(ctx context.Context) error {
		for i := range rounds {
			switch i % 3 {
			case 0:
				scheduler.Park()
			case 1:
				scheduler.Yield()
			default:
				ch.Send(i)
			}
		}
		mu.Lock()
		mu.Unlock()
		stats = scheduler.ContStats(scheduler.Current())
		return nil
	})
	peer := start(t, s, func(ctx context.Context) error {
		for range rounds / 3 {
			ch.Recv()
		}
		return nil
	})
	for done := false; !done; {
		vt.Unpark()
		select {
		case <-vt.Done():
			done = true
		case <-time.After(100 * time.Microsecond):
		}
	}
	join(t, vt)
	join(t, peer)
	// Each of the three call chains makes its template on its first
	// capture above the return barrier.
	if stats.Yields < rounds/2 || stats.Templated+8 < stats.Yields {
		t.Fatalf("%d of %d parks took the capture fast path, want all but a few", stats.Templated, stats.Yields)
	}
}

// parkOnce is a virtual thread's function that parks once, called
// directly: its frame is a return address and a saved frame pointer.
//
//go:noinline
func parkOnce(ctx context.Context) error {
	scheduler.Park()
	return nil
}

// A virtual thread parked in its own function freezes the scheduler's two
// frames around it, vthreadBody under it and Park over it, and every
// parked virtual thread keeps them: they stay within a budget of 80 bytes
// (32 and 48; a call with a wider argument list in either, such as a
// panic's or a three-argument method's, would add its words to every
// parked thread). parkOnce's own frame is 16 bytes.
func TestParkFramesBudget(t *testing.T) {
	stats := firstPark(t, parkOnce, nil)
	const budget = 80 + 16
	if stats.Yields != 1 || stats.FramesFrozen != 3 || stats.BytesFrozen > budget {
		t.Fatalf("a park in the function froze %d frames, %d bytes in %d yields; want 3 frames, at most %d bytes, in one yield", stats.FramesFrozen, stats.BytesFrozen, stats.Yields, budget)
	}
}

// countingScheduler returns a one-carrier scheduler whose virtual threads'
// continuation records count what they do (ContStats), closed when the
// test ends. It skips the test on the portable backend, which freezes no
// frames: what is the subject of the skip message.
func countingScheduler(t *testing.T, what string) *scheduler.Scheduler {
	t.Helper()
	if weft.ActiveBackend() != weft.StackCopying {
		t.Skip(what + " the stack-copying backend's: " + weft.Backend())
	}
	s, err := scheduler.New(scheduler.WithContStats(scheduler.Options{Carriers: 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// start starts fn on s, or fails the test.
func start(t *testing.T, s *scheduler.Scheduler, fn func(context.Context) error) *scheduler.VThread {
	t.Helper()
	vt, err := s.Go(fn)
	if err != nil {
		t.Fatal(err)
	}
	return vt
}

// join joins vt, and fails the test with its error.
func join(t *testing.T, vt *scheduler.VThread) {
	t.Helper()
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}

// firstPark runs fn as the only virtual thread of a one-carrier scheduler
// and returns its continuation's counters as they were at its first park,
// after which wake (if not nil) and an Unpark let it finish.
func firstPark(t *testing.T, fn func(context.Context) error, wake func()) weft.Stats {
	t.Helper()
	s := countingScheduler(t, "frozen frames are")
	vt := start(t, s, fn)
	var stats weft.Stats
	probe := start(t, s, func(ctx context.Context) error {
		// One carrier: vt has parked before this runs.
		stats = scheduler.ContStats(vt)
		if wake != nil {
			wake()
		}
		vt.Unpark()
		return nil
	})
	join(t, probe)
	join(t, vt)
	return stats
}

// A virtual thread blocked in a Chan's Send or Recv with no timeout and
// no context parks straight from the channel's send or recv, with no wait
// helper's frame between: three frames in all (send or recv, the
// function, vthreadBody), of which a ping-pong over Chans freezes and
// thaws the first two on every message (TestParkLoopLeavesBodyFrozen).
//
// Coverage instrumentation keeps Send and Recv, one-line wrappers of send
// and recv, from being inlined into a caller in another package: under
// go test -cover their own frame is the fourth.
func TestChanParkFrames(t *testing.T) {
	want := uint64(3)
	if testing.CoverMode() != "" {
		want = 4
	}
	ch := scheduler.NewChan[int](0)
	for _, c := range []struct {
		name string
		fn   func(context.Context) error
		wake func()
	}{
		{"Send", func(ctx context.Context) error { ch.Send(1); return nil }, func() { ch.Recv() }},
		{"Recv", func(ctx context.Context) error { ch.Recv(); return nil }, func() { ch.Send(1) }},
	} {
		stats := firstPark(t, c.fn, c.wake)
		if stats.Yields != 1 || stats.FramesFrozen != want {
			t.Errorf("a blocking %s froze %d frames in %d yields; want %d frames in one yield", c.name, stats.FramesFrozen, stats.Yields, want)
		}
	}
}

// recvInOrder receives n values from ch, the ith with i in its last
// element, and reports the first that was not. It and its caller, in the
// region of every park, hold no stack object (fmt.Errorf's arguments
// would be one), which would keep the parks off the fast path.
//
//go:noinline
func recvInOrder(ch *scheduler.Chan[[9]int], n int) error {
	for i := range n {
		if v, _ := ch.Recv(); v[8] != i {
			return outOfOrder(v[8], i)
		}
	}
	return nil
}

//go:noinline
func outOfOrder(got, want int) error { return fmt.Errorf("received %d, want %d", got, want) }

// A virtual thread blocked in Recv in a loop takes the capture fast path
// as one blocked in Send does (TestParkTakesCaptureFastPath has the Send
// side): recv's frame, which parks, holds no stack objects.
func TestChanRecvTakesCaptureFastPath(t *testing.T) {
	s := countingScheduler(t, "the capture fast path is")
	const rounds = 60
	ch := scheduler.NewChan[[9]int](0) // a value wider than the registers
	var stats weft.Stats
	vt := start(t, s, func(ctx context.Context) error {
		err := recvInOrder(ch, rounds)
		stats = scheduler.ContStats(scheduler.Current())
		return err
	})
	peer := start(t, s, func(ctx context.Context) error {
		for i := range rounds {
			ch.Send([9]int{8: i})
		}
		return nil
	})
	join(t, vt)
	join(t, peer)
	// One carrier: the receiver parks at least every other Recv.
	if stats.Yields < rounds/2 || stats.Templated+3 < stats.Yields {
		t.Fatalf("%d of %d parks in Recv took the capture fast path, want all but a few", stats.Templated, stats.Yields)
	}
}

// parkLoop is a virtual thread's function that parks parkRounds times,
// called directly: the park's caller's caller is vthreadBody.
//
//go:noinline
func parkLoop(ctx context.Context) error {
	for range parkRounds {
		scheduler.Park()
	}
	return nil
}

const parkRounds = 8

// A virtual thread parked in a loop leaves vthreadBody's frame frozen
// under the return barrier from its second park on: the body returns only
// when the virtual thread's function does, so a later park freezes, and
// its resume thaws, one frame less than the first. The first park freezes
// the whole stack as one record, which its resume thaws whole; the second
// freezes it again, cut so that the body is a record of its own, which
// stays frozen until the function returns into the barrier.
func TestParkLoopLeavesBodyFrozen(t *testing.T) {
	if strings.Contains(weft.Backend(), "eager thaw") {
		t.Skip("eager thaw thaws every frame on each resume: " + weft.Backend())
	}
	s := countingScheduler(t, "frozen frames are")
	const rounds = parkRounds
	vt := start(t, s, parkLoop)
	// One carrier: vt is parked, and its counters settled, whenever the
	// driver runs and finds one more yield than it last saw.
	var after [rounds]weft.Stats
	driver := start(t, s, func(ctx context.Context) error {
		for i := range rounds {
			for {
				if after[i] = scheduler.ContStats(vt); after[i].Yields == uint64(i+1) {
					break
				}
				scheduler.Yield()
			}
			vt.Unpark()
		}
		return nil
	})
	join(t, driver)
	join(t, vt)
	all := after[0].FramesFrozen // Park, parkLoop, the body
	if all < 3 || after[1].FramesFrozen != 2*all {
		t.Fatalf("the first two parks froze %d and %d frames; want the whole stack twice", all, after[1].FramesFrozen-all)
	}
	for i := 1; i < rounds; i++ {
		prev, st := after[i-1], after[i]
		thawed, want := st.FramesThawed-prev.FramesThawed, all-1
		if i == 1 {
			want = all // a whole record
		}
		if thawed != want {
			t.Errorf("resume %d thawed %d frames, want %d", i, thawed, want)
		}
		if frozen := st.FramesFrozen - prev.FramesFrozen; i > 1 && frozen != all-1 {
			t.Errorf("park %d froze %d frames, want %d: all but the body's", i+1, frozen, all-1)
		}
	}
}
