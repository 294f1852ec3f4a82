package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// nestedDepth returns how many joiners the calling virtual thread runs
// inside, counting the runNested frames on the calling goroutine's stack
// where the body runs on it (the portable backend runs it on a goroutine
// of its own), and checks that count against the carrier's.
func nestedDepth() int {
	n := Current().carrier.nested
	if !strings.HasPrefix(weft.Backend(), "stackcopy") {
		return n
	}
	pcs := make([]uintptr, 4096)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	onStack := 0
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "scheduler.runNested") {
			onStack++
		}
		if !more {
			break
		}
	}
	if onStack != n {
		panic(fmt.Sprintf("%d runNested frames on the stack, and the carrier counts %d", onStack, n))
	}
	return n
}

// wantNested is how deep a child joined from its parent at the top level
// runs nested: 1 where the scheduler nests (s.nest: the stack-copying
// backend), 0 on the portable backend, whose Join always parks.
func wantNested(s *Scheduler) int {
	if s.nest {
		return 1
	}
	return 0
}

// growStack uses about depth KiB of stack, so that the goroutine's stack is
// copied to a larger one while the frames below are those of virtual
// threads running one inside the other.
//
//go:noinline
func growStack(depth int) int {
	var buf [1024]byte
	buf[depth%len(buf)] = byte(depth)
	if depth == 0 {
		return int(buf[0])
	}
	return growStack(depth-1) + int(buf[depth%len(buf)])
}

// Join runs a child that is still queued on the joiner's carrier inside
// the joiner: the child sees itself as Current, the joiner is Current again
// once Join returns, and the carrier's bookkeeping is the joiner's again.
// A child queued elsewhere (started from a goroutine: the global queue) is
// joined by parking.
func TestJoinRunsQueuedChildNested(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	sentinel := errors.New("child's error")
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		me := Current()
		var depth int
		var self *VThread
		child, err := s.Go(func(ctx context.Context) error {
			depth, self = nestedDepth(), Current()
			runtime.GC()
			return sentinel
		})
		if err != nil {
			return err
		}
		if err := child.Join(); err != sentinel {
			return errors.New("Join = " + errString(err) + ", want the child's error")
		}
		switch {
		case depth != wantNested(s):
			return fmt.Errorf("the child ran %d deep in its joiner's Join, want %d", depth, wantNested(s))
		case self != child:
			return errors.New("Current in the nested child is not the child")
		case Current() != me:
			return errors.New("Current after Join is not the joiner")
		case me.carrier == nil || me.carrier.cur != me || me.carrier.nested != 0:
			return errors.New("the carrier's running thread or nesting count was not restored")
		}
		return nil
	})
	if err := joinWithin(t, parent); err != nil {
		t.Fatal(err)
	}

	// From a goroutine, Go queues on the global queue: a joining virtual
	// thread parks for it.
	var depth atomic.Int32
	outside, err := s.Go(func(ctx context.Context) error {
		depth.Store(int32(nestedDepth()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	joiner := goOrFatal(t, s, func(ctx context.Context) error { return outside.Join() })
	if err := joinWithin(t, joiner); err != nil {
		t.Fatal(err)
	}
	if d := depth.Load(); d != 0 {
		t.Fatalf("a virtual thread started from a goroutine ran nested %d deep", d)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// A nested child that parks is suspended on its own: its joiner parks in
// Join as usual, another virtual thread resumes the child (on the carrier's
// stack, no longer inside the joiner), and the joiner gets the child's
// result. The child grows the goroutine's stack while nested, and the
// collector runs at every step.
func TestJoinNestedChildParks(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	ch := NewChan[int](0)
	var depths [2]atomic.Int32
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		Yield() // the joiner's own frames are frozen once, behind the barrier
		sender, err := s.Go(func(ctx context.Context) error {
			runtime.GC()
			ch.Send(42)
			return nil
		})
		if err != nil {
			return err
		}
		child, err := s.Go(func(ctx context.Context) error {
			depths[0].Store(int32(nestedDepth()))
			if growStack(64) < 0 {
				return errors.New("unreachable")
			}
			runtime.GC()
			v, _ := ch.Recv() // parks: the sender is queued behind
			depths[1].Store(int32(nestedDepth()))
			runtime.GC()
			if v != 42 {
				return errors.New("received a wrong value")
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := child.Join(); err != nil {
			return err
		}
		runtime.GC()
		return sender.Join()
	})
	if err := joinWithin(t, parent); err != nil {
		t.Fatal(err)
	}
	if d0, d1 := depths[0].Load(), depths[1].Load(); d0 != int32(wantNested(s)) || d1 != 0 {
		t.Fatalf("the child ran %d deep before its park and %d after, want %d and 0", d0, d1, wantNested(s))
	}
}

// A runtime.Goexit in a child running nested ends the goroutine, its joiner
// included: the joiner's Join does not return, its deferred calls run (those
// of frames frozen before too), both end with ErrGoexit, the carrier is
// replaced, and the scheduler goes on. Wait never runs the child nested,
// so the joiner survives the child's Goexit there.
func TestJoinNestedGoexit(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	if !s.nest {
		t.Skip("the portable backend runs nothing nested: TestGoexit covers Goexit there")
	}
	var deferred, childDeferred, returned atomic.Bool
	var child atomic.Pointer[VThread]
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		defer deferred.Store(true)
		Yield() // this frame is frozen once, behind the barrier
		k, err := s.Go(func(ctx context.Context) error {
			defer childDeferred.Store(true)
			runtime.Goexit()
			return nil
		})
		if err != nil {
			return err
		}
		child.Store(k)
		k.Join()
		returned.Store(true)
		return nil
	})
	if err := joinWithin(t, parent); !errors.Is(err, ErrGoexit) {
		t.Fatalf("the joiner's Join = %v, want ErrGoexit", err)
	}
	if err := joinWithin(t, child.Load()); !errors.Is(err, ErrGoexit) {
		t.Fatalf("the child's Join = %v, want ErrGoexit", err)
	}
	if returned.Load() || !deferred.Load() || !childDeferred.Load() {
		t.Fatalf("Join returned: %v; the joiner's deferred call ran: %v; the child's: %v; want false, true, true",
			returned.Load(), deferred.Load(), childDeferred.Load())
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })

	survivor := goOrFatal(t, s, func(ctx context.Context) error {
		k, err := s.Go(func(ctx context.Context) error {
			runtime.Goexit()
			return nil
		})
		if err != nil {
			return err
		}
		if err := k.Wait(context.Background()); !errors.Is(err, ErrGoexit) {
			return errors.New("Wait = " + errString(err) + ", want ErrGoexit")
		}
		return nil
	})
	if err := joinWithin(t, survivor); err != nil {
		t.Fatal(err)
	}
}

// A nested child's panic stays the child's: Join returns it, the OnPanic
// handler sees it, and the joiner goes on.
func TestJoinNestedPanic(t *testing.T) {
	var handled atomic.Int32
	s := newTest(t, Options{Carriers: 1, OnPanic: func(*VThread, any) { handled.Add(1) }})
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		for range 3 {
			k, err := s.Go(func(ctx context.Context) error { panic("child") })
			if err != nil {
				return err
			}
			var pe *PanicError
			if err := k.Join(); !errors.As(err, &pe) || pe.Value != "child" {
				return errors.New("Join = " + errString(err) + ", want the child's panic")
			}
		}
		return nil
	})
	if err := joinWithin(t, parent); err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != 3 {
		t.Fatalf("OnPanic ran %d times, want 3", n)
	}
}

// A chain of virtual threads, each joining the next, runs nested at most
// maxNested deep on a carrier; beyond that, joiners park, and the chain
// still completes with every result. The collector runs at the bottom.
func TestJoinNestedDepthBounded(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	const n = 3 * maxNested
	var deepest atomic.Int32
	var chain func(i int) func(ctx context.Context) error
	chain = func(i int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if d := int32(nestedDepth()); d > deepest.Load() {
				deepest.Store(d)
			}
			if i == n {
				runtime.GC()
				return nil
			}
			k, err := s.Go(chain(i + 1))
			if err != nil {
				return err
			}
			return k.Join()
		}
	}
	root := goOrFatal(t, s, chain(0))
	if err := joinWithin(t, root); err != nil {
		t.Fatal(err)
	}
	if d, want := deepest.Load(), int32(maxNested*wantNested(s)); d != want {
		t.Fatalf("the chain ran %d deep, want %d", d, want)
	}
}

// A child run nested inside a joiner that is in a pinning.Do critical
// section is not pinned by it: the critical section is in the joiner's
// frames, outside the child's continuation, so the child's park suspends
// it and nothing is counted as pinned.
func TestJoinNestedInsideCriticalSection(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	ch := NewChan[int](0)
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		sender, err := s.Go(func(ctx context.Context) error { ch.Send(1); return nil })
		if err != nil {
			return err
		}
		var joinErr error
		pinning.Do(func() {
			var k *VThread
			k, joinErr = s.Go(func(ctx context.Context) error {
				if d := nestedDepth(); d != wantNested(s) {
					return fmt.Errorf("ran %d deep, want %d", d, wantNested(s))
				}
				ch.Recv() // suspends the child, not pinned
				return nil
			})
			if joinErr == nil {
				// The child parks; the joiner, pinned, blocks the carrier,
				// and a compensation carrier runs the sender and the child.
				joinErr = k.Join()
			}
		})
		if joinErr != nil {
			return joinErr
		}
		return sender.Join()
	})
	if err := joinWithin(t, parent); err != nil {
		t.Fatal(err)
	}
	// Only the joiner's park in Join is pinned, at the critical section.
	pins := s.Pins()
	if len(pins) != 1 || pins[0].Reason != pinning.CriticalSection || pins[0].Count != 1 {
		t.Fatalf("Pins() = %+v, want one CriticalSection pin (the joiner's)", pins)
	}
}

// treeShape returns the number of children of the node of a random tree
// seeded with seed, at depth levels above the leaves, and its value.
func treeShape(seed uint64, depth int) (children int, value int64) {
	if depth > 0 {
		children = rand.New(rand.NewPCG(seed, 7)).IntN(6)
	}
	return children, int64(seed % 1000)
}

// childSeed is the seed of child i of the node seeded with seed.
func childSeed(seed uint64, i int) uint64 { return seed*31 + uint64(i) + 1 }

// treeSum sums a random tree in plain recursion.
func treeSum(seed uint64, depth int) int64 {
	n, sum := treeShape(seed, depth)
	for i := range n {
		sum += treeSum(childSeed(seed, i), depth-1)
	}
	return sum
}

// vtTreeSum sums the same tree with a virtual thread per node, each of
// which yields, sleeps, grows its stack or collects at random, and joins
// its children in a random order, with Join or a Group. It counts the
// nodes that started nested in a joiner in nested.
func vtTreeSum(s *Scheduler, seed uint64, depth int, nested *atomic.Int64) (int64, error) {
	if nestedDepth() > 0 {
		nested.Add(1)
	}
	act := rand.New(rand.NewPCG(seed, 9))
	pause := func() {
		switch act.IntN(5) {
		case 0:
			Yield()
		case 1:
			Sleep(time.Duration(act.IntN(20)) * time.Microsecond)
		case 2:
			growStack(act.IntN(16))
		case 3:
			if act.IntN(20) == 0 {
				runtime.GC()
			}
		}
	}
	pause()
	n, sum := treeShape(seed, depth)
	sums := make([]int64, n)
	body := func(i int) func(ctx context.Context) error {
		return func(ctx context.Context) (err error) {
			sums[i], err = vtTreeSum(s, childSeed(seed, i), depth-1, nested)
			return err
		}
	}
	if act.IntN(4) == 0 {
		g, _ := s.NewGroup(context.Background())
		for i := range n {
			if err := g.Go(body(i)); err != nil {
				return 0, err
			}
		}
		pause()
		if err := g.Wait(); err != nil {
			return 0, err
		}
	} else {
		kids := make([]*VThread, n)
		for i := range n {
			k, err := s.Go(body(i))
			if err != nil {
				return 0, err
			}
			kids[i] = k
		}
		pause()
		for _, i := range act.Perm(n) {
			if err := kids[i].Join(); err != nil {
				return 0, err
			}
		}
	}
	for _, v := range sums {
		sum += v
	}
	return sum, nil
}

// Random trees of virtual threads joining their children, on more carriers
// than CPUs so that thieves race the joiners for queued children, with
// parks, stack growth and collections throughout: every sum is right and
// every virtual thread ends.
func TestStressNestedJoin(t *testing.T) {
	s := newTest(t, Options{Carriers: 4})
	trees := 40
	if testing.Short() || raceEnabled {
		trees = 10 // under -race each thread costs the detector ~5 KB for good
	}
	const depth = 6
	roots := make([]*VThread, trees)
	got := make([]int64, trees)
	var nested atomic.Int64
	for i := range roots {
		roots[i] = goOrFatal(t, s, func(ctx context.Context) (err error) {
			got[i], err = vtTreeSum(s, uint64(i)+1, depth, &nested)
			return err
		})
	}
	for i, root := range roots {
		if err := joinWithin(t, root); err != nil {
			t.Fatalf("tree %d: %v", i, err)
		}
		if want := treeSum(uint64(i)+1, depth); got[i] != want {
			t.Fatalf("tree %d: sum %d, want %d", i, got[i], want)
		}
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })
	// Whether a given child runs nested is a race; that none did would
	// mean the test no longer tests it.
	if nested.Load() == 0 && s.nest {
		t.Fatal("no virtual thread ran nested in its joiner")
	}
	t.Logf("%d virtual threads started nested in their joiners", nested.Load())
}

// A virtual thread started and joined inside a continuation that its
// parent's body mounted (here a continuation.Pull and a continuation.New)
// is not run nested there: it cannot see that continuation, its yield to
// it fails as from any other virtual thread (a panic, which Join returns),
// and the parent's carrier is left as it was. Run nested, the child's
// yield froze the carrier's own frames into the generator, leaving the
// carrier running the child's record; a Goexit of the parent then ended
// the child's instead and the parent never finished.
func TestJoinInsideUserContinuation(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	us := scope.New("user")
	parent := goOrFatal(t, s, func(ctx context.Context) error {
		var seen bool
		k := continuation.New(us, func() {
			child, err := s.Go(func(ctx context.Context) error {
				seen = continuation.Current(us) != nil
				return nil
			})
			if err == nil {
				child.Join()
			}
		})
		k.Run()
		if seen {
			return errors.New("a joined child saw its joiner's user continuation")
		}

		var childErr error
		next, stop := continuation.Pull(func(yield func(int) bool) {
			child, err := s.Go(func(ctx context.Context) error {
				yield(1)
				return nil
			})
			if err == nil {
				childErr = child.Join()
			}
		})
		defer stop()
		if v, ok := next(); ok {
			return fmt.Errorf("the generator yielded %d from the child", v)
		}
		var pe *PanicError
		if !errors.As(childErr, &pe) {
			return errors.New("the child's yield to the generator: Join = " + errString(childErr) + ", want its panic")
		}
		me := Current()
		if c := me.carrier; c.cur != me || c.nested != 0 {
			return errors.New("the carrier's running thread or nesting count changed")
		}
		runtime.Goexit()
		return nil
	})
	if err := joinWithin(t, parent); !errors.Is(err, ErrGoexit) {
		t.Fatalf("Join = %v, want ErrGoexit", err)
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })
}

// A child that parks while nested, with its permit already there, is queued
// again by its carrier; its joiner then parks pinned in Join, with no
// compensation carrier: the other carrier must be woken for the child.
// (The carrier queued it with no wake-up, and the joiner hung.)
func TestJoinNestedPermitRequeuePinned(t *testing.T) {
	s := newTest(t, Options{Carriers: 2, MaxCompensation: -1})
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	for round := range rounds {
		var child atomic.Pointer[VThread]
		stop := make(chan struct{})
		unparked := make(chan struct{})
		go func() { // Unparks the child until told to stop
			defer close(unparked)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if vt := child.Load(); vt != nil {
					vt.Unpark()
				}
				runtime.Gosched()
			}
		}()
		joiner := goOrFatal(t, s, func(ctx context.Context) error {
			k, err := s.Go(func(ctx context.Context) error {
				child.Store(Current())
				Park()
				Park()
				return nil
			})
			if err != nil {
				return err
			}
			pinning.Do(func() { err = k.Join() })
			return err
		})
		if !doneWithin(joiner, 5*time.Second) {
			close(stop)
			t.Fatalf("round %d: the joiner hung", round)
		}
		close(stop)
		<-unparked
		if err := joiner.Join(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// A joiner that holds runtime.LockOSThread joins a queued child that parks
// and is resumed by whichever carrier: on the portable backend a child run
// nested would be a coroutine bound to the joiner's thread locking, and
// its resumption elsewhere a fatal error.
func TestJoinFromLockedThread(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	for range 20 {
		p := goOrFatal(t, s, func(ctx context.Context) error {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			child, err := s.Go(func(ctx context.Context) error {
				Sleep(100 * time.Microsecond)
				return nil
			})
			if err != nil {
				return err
			}
			return child.Join()
		})
		if err := joinWithin(t, p); err != nil {
			t.Fatal(err)
		}
	}
}

// Current finds the calling virtual thread from inside a continuation that
// its body mounted (the innermost continuation is then not a virtual
// thread's), and finds none from a plain goroutine running such a
// continuation, or a virtual thread's body nested in two of them.
func TestCurrentInsideUserContinuation(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	us := scope.New("user")
	if got := Current(); got != nil {
		t.Fatalf("Current() from the test goroutine = %v, want nil", got)
	}
	var plain *VThread
	continuation.New(us, func() { plain = Current() }).Run()
	if plain != nil {
		t.Fatalf("Current() in a continuation run by a plain goroutine = %v, want nil", plain)
	}
	var outer, inner, self *VThread
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		self = Current()
		continuation.New(us, func() {
			outer = Current()
			continuation.New(scope.New("inner"), func() { inner = Current() }).Run()
		}).Run()
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if self != vt || outer != vt || inner != vt {
		t.Fatalf("Current() in the body, one and two continuations deep = %v, %v, %v; want %v each", self, outer, inner, vt)
	}
}

// A panic and a runtime.Goexit raised inside continuations that a virtual
// thread's body mounted unwind out of them into the body's deferred
// call, which must find the virtual thread itself (the continuations have
// unmounted by then): Join reports the panic, with the OnPanic handler
// called for that thread, and ErrGoexit; a returned error after a nested
// continuation ran is the thread's too.
func TestBodyEndsInsideUserContinuation(t *testing.T) {
	us := scope.New("user")
	var handled atomic.Pointer[VThread]
	s := newTest(t, Options{Carriers: 1, OnPanic: func(vt *VThread, v any) { handled.Store(vt) }})
	nested := func(end func()) {
		continuation.New(us, func() {
			continuation.New(scope.New("inner"), end).Run()
		}).Run()
	}
	p := goOrFatal(t, s, func(ctx context.Context) error {
		nested(func() { panic("deep") })
		return nil
	})
	var pe *PanicError
	if err := joinWithin(t, p); !errors.As(err, &pe) || pe.Value != "deep" {
		t.Fatalf("Join after a panic two continuations deep = %v, want the panic", err)
	}
	if got := handled.Load(); got != p {
		t.Fatalf("OnPanic got %v, want the panicking thread %v", got, p)
	}
	g := goOrFatal(t, s, func(ctx context.Context) error {
		nested(runtime.Goexit)
		return nil
	})
	if err := joinWithin(t, g); !errors.Is(err, ErrGoexit) {
		t.Fatalf("Join after a Goexit two continuations deep = %v, want ErrGoexit", err)
	}
	want := errors.New("mine")
	r := goOrFatal(t, s, func(ctx context.Context) error {
		nested(func() {})
		return want
	})
	if err := joinWithin(t, r); err != want {
		t.Fatalf("Join after nested continuations ran = %v, want the body's error", err)
	}
}
