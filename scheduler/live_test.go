package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The live count is kept in shards (one per carrier, and one for starts
// from outside the carriers), and virtual thread IDs come from per-carrier
// batches. These tests start and end virtual threads on every carrier at
// once, so that a thread often starts in one shard and ends in another.

// churn starts, from a virtual thread on s, children that each start a few
// grandchildren and join them, until stop is closed or s refuses
// (ErrClosed). Joins that the child's own carrier does not take back (a
// thief took the grandchild) make threads end on other carriers than they
// started on. Grandchildren yield, or with sleep set sleep a few
// microseconds, so that a timer wakes them from outside the carriers.
// record, if not nil, is told every virtual thread churn starts.
func churn(s *Scheduler, stop <-chan struct{}, sleep bool, record func(*VThread)) error {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return nil
		default:
		}
		vt, err := s.Go(func(ctx context.Context) error {
			var kids [4]*VThread
			for i := range kids {
				k, err := s.Go(func(ctx context.Context) error {
					if sleep {
						Sleep(time.Duration(1+i*20) * time.Microsecond)
					} else {
						Yield()
					}
					return nil
				})
				if err != nil {
					break // closing: the ones started still end
				}
				if record != nil {
					record(k)
				}
				kids[i] = k
			}
			for _, k := range kids {
				if k != nil {
					if err := k.Join(); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return nil
			}
			return err
		}
		if record != nil {
			record(vt)
		}
		if n%8 == 7 {
			Yield()
		}
	}
}

// Live counts every virtual thread live throughout the call, however the
// others start and end across the shards meanwhile, and never goes below
// zero; at rest it is exact.
func TestLiveWhileChurning(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 4})
	const parked = 50
	park := NewChan[struct{}](0)
	closePark := sync.OnceFunc(park.Close)
	defer closePark() // after a failed check too: let the holders go
	var waiting atomic.Int32
	var holders []*VThread
	for range parked {
		vt, err := s.Go(func(ctx context.Context) error {
			waiting.Add(1)
			park.Recv()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, vt)
	}
	waitUntil(t, "the holders to park", func() bool { return waiting.Load() == parked })

	stop := make(chan struct{})
	stopChurn := sync.OnceFunc(func() { close(stop) })
	defer stopChurn()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		drv, err := s.Go(func(ctx context.Context) error {
			defer wg.Done()
			return churn(s, stop, false, nil)
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() { errs <- drv.Join() }()
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	reads := 0
	for time.Now().Before(deadline) {
		if n := s.Live(); n < parked {
			t.Fatalf("Live() = %d with %d virtual threads parked throughout", n, parked)
		}
		reads++
	}
	stopChurn()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	waitUntil(t, "the churn to end", func() bool { return s.Live() == parked })
	closePark()
	for _, vt := range holders {
		joinWithin(t, vt)
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })
	t.Logf("%d reads of Live while churning", reads)
}

// Shutdown waits for every virtual thread it let start, when the last ones
// end on different carriers than they started on, some woken by timers
// from outside the carriers, and while virtual threads on every carrier
// are still starting others (each counted in its carrier's shard): the
// last one out, whichever shard it counts in, must see the others' ends,
// and nothing may count as the last while a thread is still live. A
// watcher checks, the moment the scheduler counts itself drained, that
// every thread it accepted has finished.
func TestShutdownRacesStartsOnCarriers(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for round := range rounds {
		s, err := New(Options{Carriers: 4, LockOSThread: new(bool)})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var accepted []*VThread
		record := func(vt *VThread) {
			mu.Lock()
			accepted = append(accepted, vt)
			mu.Unlock()
		}
		early := make(chan int, 1)
		go func() {
			<-s.allDone
			mu.Lock()
			defer mu.Unlock()
			live := 0
			for _, vt := range accepted {
				if !vt.finished() {
					live++
				}
			}
			early <- live
		}()
		var started sync.WaitGroup
		for k := range 4 {
			started.Add(1)
			drv, err := s.Go(func(ctx context.Context) error {
				started.Done()
				err := churn(s, nil, true, record)
				// Refused: sleep a while, a different while for each
				// driver, so that the last is often the only one
				// live, and a count off by one lets the carriers go
				// while it sleeps.
				Sleep(time.Duration(k+1) * 300 * time.Microsecond)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			record(drv)
		}
		started.Wait()
		time.Sleep(time.Duration(round%20) * 50 * time.Microsecond)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		err = s.Shutdown(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Shutdown: %v (Live = %d)", round, err, s.Live())
		}
		if live := <-early; live > 0 {
			t.Fatalf("round %d: the scheduler counted itself drained with %d of its %d virtual threads unfinished", round, live, len(accepted))
		}
		for _, vt := range accepted {
			if err := vt.Join(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if n := s.Live(); n != 0 {
			t.Fatalf("round %d: Live() = %d after Shutdown", round, n)
		}
	}
}

// IDs are unique across carriers' batches and starts from plain
// goroutines, and deterministic mode numbers virtual threads in the order
// they start.
func TestIDsUnique(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 4})
	var mu sync.Mutex
	seen := map[uint64]string{}
	record := func(vt *VThread, where string) error {
		mu.Lock()
		defer mu.Unlock()
		if vt.ID() == 0 {
			return fmt.Errorf("%s: ID 0", where)
		}
		if prev, dup := seen[vt.ID()]; dup {
			return fmt.Errorf("ID %d given twice: %s and %s", vt.ID(), prev, where)
		}
		seen[vt.ID()] = where
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() { // from a plain goroutine
			defer wg.Done()
			for i := range 300 {
				vt, err := s.Go(func(ctx context.Context) error { return nil })
				if err == nil {
					err = record(vt, fmt.Sprintf("goroutine %d #%d", g, i))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
		drv, err := s.Go(func(ctx context.Context) error { // from virtual threads
			for i := range 300 {
				vt, err := s.Go(func(ctx context.Context) error { return nil })
				if err == nil {
					err = record(vt, fmt.Sprintf("driver %d #%d on carrier %d", g, i, Current().carrier.id))
				}
				if err != nil {
					return err
				}
				if i%10 == 0 {
					Yield() // move between carriers
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := drv.Join(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != 8*300 {
		t.Fatalf("%d IDs recorded, want %d", len(seen), 8*300)
	}

	d := boundedSched(t, Options{Deterministic: true, Seed: 1})
	var ids []uint64
	root, err := d.Go(func(ctx context.Context) error {
		for range 5 {
			vt, err := d.Go(func(ctx context.Context) error { return nil })
			if err != nil {
				return err
			}
			ids = append(ids, vt.ID())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	joinWithin(t, root)
	last, err := d.Go(func(ctx context.Context) error { return nil }) // from this goroutine
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, last.ID())
	joinWithin(t, last)
	for i, id := range ids {
		if want := root.ID() + 1 + uint64(i); id != want {
			t.Fatalf("deterministic mode: IDs %v after the root's %d, want consecutive, the last one started from outside", ids, root.ID())
		}
	}
}

// TestLiveAfterJoin: a virtual thread is counted out before its joiners
// can see it finished, so Live after a Join that returned does not count
// it. The carrier is held at the end of finish, after it woke the joiner,
// while the joiner looks (CI once saw Live() = 1 after every Join had
// returned, when the count came last).
func TestLiveAfterJoin(t *testing.T) {
	s, err := New(Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release := make(chan struct{})
	defer close(release) // before Close: a carrier held in the hook goes on
	held := make(chan struct{}, 1)
	hook := func(*VThread) {
		select {
		case held <- struct{}{}:
			<-release
		default:
		}
	}
	testHooks.finish.Store(&hook)
	defer testHooks.finish.Store(nil)
	for _, how := range []string{"Join", "Wait", "Done"} {
		vt, err := s.Go(func(ctx context.Context) error { Sleep(time.Millisecond); return nil })
		if err != nil {
			t.Fatal(err)
		}
		switch how {
		case "Join":
			err = vt.Join()
		case "Wait":
			err = vt.Wait(context.Background())
		case "Done":
			<-vt.Done()
		}
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		n := s.Live()
		select {
		case <-held: // the carrier waits at the end of finish
			release <- struct{}{}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the carrier never reached the end of finish", how)
		}
		if n != 0 {
			t.Errorf("after %s returned: Live() = %d, want 0", how, n)
		}
	}
}
