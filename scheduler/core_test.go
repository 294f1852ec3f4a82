package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

func newTest(t *testing.T, opts Options) *Scheduler {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

func TestGoJoin(t *testing.T) {
	s := newTest(t, Options{})
	want := errors.New("boom")
	vt, err := s.Go(func(ctx context.Context) error {
		if Current() == nil {
			return errors.New("Current() is nil inside a virtual thread")
		}
		return want
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := vt.Join(); got != want {
		t.Fatalf("Join = %v, want %v", got, want)
	}
}

func TestParkUnpark(t *testing.T) {
	s := newTest(t, Options{})
	var stage atomic.Int32
	vt, _ := s.Go(func(ctx context.Context) error {
		stage.Store(1)
		for stage.Load() != 2 {
			Park()
		}
		stage.Store(3)
		return nil
	})
	for stage.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	stage.Store(2)
	vt.Unpark()
	if err := vt.Join(); err != nil || stage.Load() != 3 {
		t.Fatalf("Join = %v, stage %d", err, stage.Load())
	}
}

func TestPanicSurfaces(t *testing.T) {
	var handled atomic.Int32
	s := newTest(t, Options{OnPanic: func(*VThread, any) { handled.Add(1) }})
	vt, _ := s.Go(func(ctx context.Context) error { panic("oops") })
	var pe *PanicError
	if err := vt.Join(); !errors.As(err, &pe) || pe.Value != "oops" {
		t.Fatalf("Join = %v", err)
	}
	if handled.Load() != 1 {
		t.Fatalf("OnPanic called %d times", handled.Load())
	}
	// The carriers survive.
	vt, _ = s.Go(func(ctx context.Context) error { return nil })
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}

func TestSleepAndJoinFromVThread(t *testing.T) {
	s := newTest(t, Options{})
	vt, _ := s.Go(func(ctx context.Context) error {
		child, _ := s.Go(func(ctx context.Context) error {
			Sleep(5 * time.Millisecond)
			return errors.New("child")
		})
		start := time.Now()
		err := child.Join()
		if time.Since(start) < 4*time.Millisecond {
			return errors.New("joined too early")
		}
		return err
	})
	if err := vt.Join(); err == nil || err.Error() != "child" {
		t.Fatalf("Join = %v", err)
	}
}

func skynet(s *Scheduler, num, size, div int) int {
	if size == 1 {
		return num
	}
	var sum atomic.Int64
	children := make([]*VThread, div)
	for i := range div {
		sub := num + i*(size/div)
		children[i], _ = s.Go(func(ctx context.Context) error {
			sum.Add(int64(skynet(s, sub, size/div, div)))
			return nil
		})
	}
	for _, c := range children {
		c.Join()
	}
	return int(sum.Load())
}

func TestSkynetSmall(t *testing.T) {
	s := newTest(t, Options{})
	var got int
	vt, _ := s.Go(func(ctx context.Context) error { got = skynet(s, 0, 10000, 10); return nil })
	vt.Join()
	if want := 10000 * 9999 / 2; got != want {
		t.Fatalf("skynet = %d, want %d", got, want)
	}
}

func TestDeterministicSleep(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	var order []int
	// Started from one root virtual thread, so that the virtual clock
	// cannot move on between two of the Go calls.
	root, _ := s.Go(func(ctx context.Context) error {
		var vts []*VThread
		for i := 3; i >= 1; i-- {
			vt, _ := s.Go(func(ctx context.Context) error {
				Sleep(time.Duration(i) * time.Hour)
				order = append(order, i)
				return nil
			})
			vts = append(vts, vt)
		}
		for _, vt := range vts {
			vt.Join()
		}
		return nil
	})
	root.Join()
	if len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3 {
		t.Fatalf("woke in order %v", order)
	}
}

// A timer armed from a plain goroutine on an idle deterministic scheduler
// fires: the virtual clock jumps to it, as it does for virtual threads'
// timers, instead of the carrier sleeping on with a timer pending.
func TestDeterministicTimerFromGoroutine(t *testing.T) {
	s := newTest(t, Options{Deterministic: true, Seed: 1})
	vt, _ := s.Go(func(ctx context.Context) error { return nil })
	vt.Join()
	for i := range 20 {
		time.Sleep(time.Millisecond) // let the carrier go to sleep
		start := s.Now()
		fired := make(chan time.Time, 1)
		s.AfterFunc(time.Hour, func() { fired <- s.Now() })
		select {
		case at := <-fired:
			if got := at.Sub(start); got != time.Hour {
				t.Fatalf("round %d: fired after %v of virtual time, want 1h", i, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a timer armed from a goroutine never fired", i)
		}
	}
}

// Locked carriers and the portable backend: a portable continuation must be
// resumed under the thread locking it was first run under, so New refuses
// locked carriers that virtual threads could move between.
func TestLockedCarriersNeedStackCopying(t *testing.T) {
	lock := true
	s, err := New(Options{Carriers: 2, LockOSThread: &lock})
	if weft.ActiveBackend() == weft.StackCopying {
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		s.Close()
		return
	}
	if err == nil {
		s.Close()
		t.Fatal("New accepted locked carriers on the portable backend")
	}
}

type ctxKey struct{}

// A virtual thread's context carries its parent's values and cancellation
// and the virtual thread itself; Done works before and after the end.
func TestVThreadContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	s := newTest(t, Options{Context: parent})
	started := make(chan struct{})
	vt, err := s.Go(func(ctx context.Context) error {
		if got := FromContext(ctx); got != Current() || got == nil {
			return errors.New("FromContext does not find the virtual thread")
		}
		if ctx.Value(ctxKey{}) != "v" {
			return errors.New("the parent's value is lost")
		}
		child, stop := context.WithCancel(ctx)
		defer stop()
		if FromContext(child) != Current() {
			return errors.New("FromContext does not see through a derived context")
		}
		close(started)
		<-ctx.Done() // blocks the carrier; only the parent's cancel ends it
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	select {
	case <-vt.Done():
		t.Fatal("Done closed before the end")
	default:
	}
	cancel()
	<-vt.Done()
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Join: %v, want context.Canceled", err)
	}
	<-vt.Done() // made after the end: closed already
	if FromContext(context.Background()) != nil || FromContext(vt.Context()) != vt {
		t.Fatal("FromContext outside a virtual thread")
	}
}

// Done and Join from goroutines race with the end of virtual threads that
// do nothing: the channel made on demand is closed exactly once, whichever
// comes first.
func TestDoneRacesEnd(t *testing.T) {
	s := newTest(t, Options{})
	for i := range 20000 {
		vt, err := s.Go(func(ctx context.Context) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			<-vt.Done()
		} else if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
	}
}

// Many parties join one virtual thread at once: virtual threads (the
// first is the joiner slot, the rest queue), Wait with a context, and
// goroutines; each sees its error once it has finished, and joining a
// finished one returns at once.
func TestManyJoiners(t *testing.T) {
	for _, carriers := range []int{1, 2} {
		s := newTest(t, Options{Carriers: carriers})
		want := errors.New("target")
		for round := range 50 {
			release := make(chan struct{})
			target, err := s.Go(func(ctx context.Context) error {
				for {
					select {
					case <-release:
						return want
					default:
						Yield()
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			var got atomic.Int32
			var joiners []*VThread
			for k := range 6 {
				j, err := s.Go(func(ctx context.Context) error {
					var err error
					if k%2 == 0 {
						err = target.Join()
					} else {
						err = target.Wait(ctx)
					}
					if err != want {
						return err
					}
					got.Add(1)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				joiners = append(joiners, j)
			}
			done := make(chan error, 2)
			for range 2 {
				go func() { done <- target.Join() }()
			}
			if round%2 == 0 {
				Sleep(time.Duration(round) * time.Microsecond)
			}
			close(release)
			for range 2 {
				if err := <-done; err != want {
					t.Fatalf("goroutine Join: %v", err)
				}
			}
			for _, j := range joiners {
				if err := j.Join(); err != nil {
					t.Fatalf("joiner: %v", err)
				}
			}
			if got.Load() != 6 {
				t.Fatalf("%d of 6 joiners saw the end", got.Load())
			}
			if err := target.Join(); err != want {
				t.Fatalf("Join after the end: %v", err)
			}
		}
	}
}

// Every virtual thread carries a VThread: it keeps to the 128-byte size
// class on 64-bit platforms (docs/benchmarks.md, bytes per parked
// virtual thread). A field added must pay for itself: the channel a pinned
// park waits on went to the carrier, and the kept channel node became one
// pointer, to come down from 144 bytes.
func TestVThreadSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are budgeted for 64-bit platforms")
	}
	if n := unsafe.Sizeof(VThread{}); n > 128 {
		t.Fatalf("VThread is %d bytes, over its 128-byte budget (a size class)", n)
	}
}

// A virtual thread that locks its thread and parks blocks its carrier
// instead of moving to another (pinned, counted under LockedThread); once
// unlocked, it parks as usual.
func TestParkLockedThread(t *testing.T) {
	if _, ok := rt.LockCount(); !ok {
		t.Skip("the thread's LockOSThread count cannot be read here (runtime layout not mirrored), so LockedThread is not detected")
	}
	s := newTest(t, Options{Carriers: 1})
	vt, err := s.Go(func(ctx context.Context) error {
		runtime.LockOSThread()
		Park() // pinned: blocks the carrier until Unpark
		runtime.UnlockOSThread()
		Park() // suspends
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for vt.state.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("state %d, want %d", vt.state.Load(), want)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitState(vtPinned)
	vt.Unpark()
	waitState(vtParked)
	vt.Unpark()
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range s.Pins() {
		if p.Reason == pinning.LockedThread {
			n += p.Count
		}
	}
	if n != 1 {
		t.Fatalf("Pins() = %v, want one LockedThread", s.Pins())
	}
}

// Virtual threads started from a virtual thread reuse the continuation
// records of those that ended on its carrier. Each generation here parks
// and yields with heap pointers and addresses of its own locals live
// across the suspensions, under runtime.GC, in a record that earlier
// generations froze their frames into: nothing of theirs may show.
func TestContReuse(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	const gens = 40
	var seen []*weft.Cont
	parent, err := s.Go(func(ctx context.Context) error {
		for gen := range gens {
			child, err := s.Go(func(ctx context.Context) error {
				seen = append(seen, Current().cont)
				local := [3]int{gen, gen, gen}
				p := &local[1]
				h := &struct{ v []int }{v: []int{gen}}
				for i := range 3 {
					Current().Unpark()
					Park()
					runtime.GC()
					Yield()
					*p += i
					h.v = append(h.v, gen+i)
				}
				if local != [3]int{gen, gen + 3, gen} || len(h.v) != 4 || h.v[3] != gen+2 {
					return fmt.Errorf("generation %d: locals %v and heap %v after its suspensions", gen, local, h.v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err := child.Join(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Join(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != gens {
		t.Fatalf("%d generations ran, want %d", len(seen), gens)
	}
	for i := 1; i < gens; i++ {
		if seen[i] != seen[0] {
			t.Fatalf("generation %d ran in another continuation record than generation 0: records are not reused", i)
		}
	}
}

// TestFreeRecordKeepsSlot: a record that Go takes from its carrier's free
// records stays in its slot past their length, and comes back to it with
// nothing else changed when its virtual thread ends on that carrier
// (newCont and carrier.keep store no pointer either way, which the
// collector's write barrier would cost while it marks).
func TestFreeRecordKeepsSlot(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	nop := func(context.Context) error { return nil }
	vt, err := s.Go(func(context.Context) error {
		c := Current().carrier
		for range 2 { // leave a record on c
			child, err := s.Go(nop)
			if err != nil {
				return err
			}
			if err := child.Join(); err != nil {
				return err
			}
		}
		n := len(c.free)
		if n == 0 {
			return errors.New("no record kept on the carrier after two children ended there")
		}
		kept := c.free[n-1]
		child, err := s.Go(nop)
		if err != nil {
			return err
		}
		if child.cont != kept || len(c.free) != n-1 || c.free[:n][n-1] != kept {
			return fmt.Errorf("Go took record %p, left %d free and %p in the slot past them; want %p, %d, %p",
				child.cont, len(c.free), c.free[:n][n-1], kept, n-1, kept)
		}
		if err := child.Join(); err != nil {
			return err
		}
		if len(c.free) != n || c.free[n-1] != kept {
			return fmt.Errorf("after the child ended: free records %p; want %d, the last %p", c.free, n, kept)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}
