package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMutexMixedStress: goroutines and virtual threads on one
// Mutex, with critical sections long enough to push it into handoff mode,
// never overlap and all finish.
func TestMutexMixedStress(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	var m Mutex
	var inside atomic.Int32
	var count int
	per := iters(3000, 500)
	mixed(t, s, 4, 4, func(i int) {
		for k := range per {
			m.Lock()
			if inside.Add(1) != 1 {
				t.Errorf("two holders")
			}
			count++
			if k%50 == 0 {
				time.Sleep(1500 * time.Microsecond) // starve the waiters
			}
			inside.Add(-1)
			m.Unlock()
			if k%3 == 0 {
				pause(i)
			}
		}
	})
	if count != 8*per {
		t.Fatalf("count %d, want %d", count, 8*per)
	}
}

// TestLockHandOffAcross: locks taken in one party and unlocked in
// another (a virtual thread locks, a goroutine unlocks, and the other way
// round), with TryLock and TryRLock beside, keep exclusion and progress.
func TestLockHandOffAcross(t *testing.T) {
	s := newSched(t, Options{Carriers: 3})
	var m Mutex
	var rw RWMutex
	var inside, winside, rinside atomic.Int32
	per := iters(300, 100) // each hand-off to a helper spins until it has unlocked
	// Each party locks, then asks the next one round to unlock for it.
	const parties = 6
	unlockM := make([]chan struct{}, parties)
	unlockW := make([]chan struct{}, parties)
	for i := range unlockM {
		unlockM[i] = make(chan struct{}, 1)
		unlockW[i] = make(chan struct{}, 1)
	}
	stop := make(chan struct{})
	var helpers sync.WaitGroup
	for i := range parties {
		helpers.Add(1)
		go func() { // the unlocking side, a plain goroutine
			defer helpers.Done()
			for {
				select {
				case <-unlockM[i]:
					inside.Add(-1)
					m.Unlock()
				case <-unlockW[i]:
					winside.Add(-1)
					rw.Unlock()
				case <-stop:
					return
				}
			}
		}()
	}
	mixed(t, s, parties/2, parties/2, func(i int) {
		for k := range per {
			if k%4 == 0 {
				for !m.TryLock() {
					pause(i)
				}
			} else {
				m.Lock()
			}
			if inside.Add(1) != 1 {
				t.Errorf("mutex: two holders")
			}
			if k%2 == 0 {
				unlockM[i] <- struct{}{} // unlocked by the helper
				// Wait until it has: the next Lock must not be ours.
				for len(unlockM[i]) > 0 {
					pause(i)
				}
			} else {
				inside.Add(-1)
				m.Unlock()
			}
			switch k % 3 {
			case 0:
				rw.Lock()
				if winside.Add(1) != 1 || rinside.Load() != 0 {
					t.Errorf("rw: writer not alone")
				}
				unlockW[i] <- struct{}{}
				for len(unlockW[i]) > 0 {
					pause(i)
				}
			case 1:
				if !rw.TryRLock() {
					rw.RLock()
				}
				rinside.Add(1)
				if winside.Load() != 0 {
					t.Errorf("rw: reader beside writer")
				}
				pause(i)
				rinside.Add(-1)
				rw.RUnlock()
			case 2:
				if rw.TryLock() {
					if winside.Add(1) != 1 || rinside.Load() != 0 {
						t.Errorf("rw: TryLock writer not alone")
					}
					winside.Add(-1)
					rw.Unlock()
				}
			}
		}
	})
	close(stop)
	helpers.Wait()
}

func TestMutexMixed(t *testing.T) {
	s := newSched(t, Options{})
	var m Mutex
	var inside atomic.Int32
	counter := 0
	n := iters(2000, 300)
	const nv, ng = 64, 8
	mixed(t, s, nv, ng, func(id int) {
		for i := range n {
			m.Lock()
			if inside.Add(1) != 1 {
				t.Error("two holders of the Mutex at once")
			}
			counter++
			if i%8 == 0 {
				pause(i) // park while holding it: others queue
			}
			inside.Add(-1)
			m.Unlock()
		}
	})
	if want := (nv + ng) * n; counter != want {
		t.Fatalf("counter = %d, want %d", counter, want)
	}
}

// TestMutexNoLostWakeups queues waiters on a held Mutex, round after round,
// and checks that each Unlock lets them all through.
func TestMutexNoLostWakeups(t *testing.T) {
	s := newSched(t, Options{})
	var m Mutex
	rounds := iters(2000, 300)
	for r := range rounds {
		m.Lock()
		var wg sync.WaitGroup
		wg.Add(4)
		body := func() {
			m.Lock()
			m.Unlock()
			wg.Done()
		}
		s.Go(func(context.Context) error { body(); return nil })
		s.Go(func(context.Context) error { body(); return nil })
		go body()
		go body()
		if r%2 == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		m.Unlock()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		if !waitDone(t, done, 10*time.Second, fmt.Sprintf("round %d", r)) {
			return
		}
	}
}

func TestMutexTryLockAndMisuse(t *testing.T) {
	var m Mutex
	if !m.TryLock() {
		t.Fatal("TryLock of a free Mutex failed")
	}
	if m.TryLock() {
		t.Fatal("TryLock of a locked Mutex succeeded")
	}
	m.Unlock()
	if !m.TryLock() {
		t.Fatal("TryLock after Unlock failed")
	}
	m.Unlock()
	if msg := mustPanic(t, m.Unlock); !strings.Contains(msg, "Unlock of unlocked Mutex") {
		t.Fatalf("Unlock of unlocked Mutex panicked with %q", msg)
	}
	var rw RWMutex
	if msg := mustPanic(t, rw.Unlock); !strings.Contains(msg, "Unlock of unlocked RWMutex") {
		t.Fatalf("panic %q", msg)
	}
	if msg := mustPanic(t, rw.RUnlock); !strings.Contains(msg, "RUnlock of unlocked RWMutex") {
		t.Fatalf("panic %q", msg)
	}
}

// TestMutexLeavesHandoff: once waits are short again, the Mutex goes back
// to barging even though its queue never empties. Four virtual threads
// lock and unlock it in a loop. The first holds it 3 ms a round until a
// waiter that waited longer than the threshold has lost a race and
// switched it to handoff mode, then goes on with 500 short rounds while
// the others keep contending. The Mutex leaves handoff mode before its
// queue empties, which under steady contention is never: only a few of
// the acquisitions after the switch are hand-offs, a park and an unpark
// each.
func TestMutexLeavesHandoff(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	var m Mutex
	var mu sync.Mutex // guards the counts, which the threads update under m too
	entered, after, handed, longs := false, 0, 0, 0
	var done atomic.Bool
	var vts []*VThread
	for i := range 4 {
		vt, err := s.Go(func(context.Context) error {
			for j := 0; ; j++ {
				if i == 0 && j >= longs+500 || i != 0 && done.Load() {
					done.Store(true)
					return nil
				}
				m.Lock()
				starving := m.state.Load()&mutexStarving != 0
				mu.Lock()
				if entered {
					after++
					if starving {
						handed++
					}
				} else {
					entered = starving
				}
				longHold := i == 0 && !entered && longs < 100
				if longHold {
					longs++
				}
				mu.Unlock()
				if longHold {
					time.Sleep(3 * time.Millisecond)
				}
				m.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		vts = append(vts, vt)
	}
	for _, vt := range vts {
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
	}
	if !entered {
		t.Fatalf("the Mutex never switched to handoff mode in %d long holds: the test tests nothing", longs)
	}
	if handed > after/4 {
		t.Errorf("%d of the %d acquisitions after the switch to handoff mode were hand-offs: it did not switch back", handed, after)
	}
	t.Logf("%d of %d acquisitions after the switch were hand-offs (%d long holds)", handed, after, longs)
}

// TestMutexStarvation: a holder that unlocks and relocks at once wins
// every race against a woken waiter, which would starve without handoff
// mode. Count how many times the holder gets the lock while a waiter
// waits: about 1 ms (the threshold) of short holds with handoff, hundreds
// or thousands without.
func TestMutexStarvation(t *testing.T) {
	s := newSched(t, Options{})
	var m Mutex
	var holds atomic.Int64
	stop := make(chan struct{})
	hammered := make(chan struct{})
	go func() {
		defer close(hammered)
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.Lock()
			holds.Add(1)
			time.Sleep(20 * time.Microsecond) // the waiters run meanwhile, and find it locked
			m.Unlock()
		}
	}()
	defer func() { close(stop); <-hammered }()
	time.Sleep(time.Millisecond)
	const waits = 7
	var passed [waits]int64
	for k := range waits {
		done := make(chan struct{})
		before := holds.Load()
		lock := func() { m.Lock(); passed[k] = holds.Load() - before; m.Unlock(); close(done) }
		if k%2 == 0 {
			go lock()
		} else {
			s.Go(func(context.Context) error { lock(); return nil })
		}
		if !waitDone(t, done, 10*time.Second, "a waiter against a relocking holder") {
			return
		}
	}
	sorted := passed
	slices.Sort(sorted[:])
	if median := sorted[waits/2]; median > 200 {
		t.Fatalf("the holder relocked %v times while each waiter waited (median %d): starving", passed, median)
	}
	t.Logf("holds while waiting: %v", passed)
}

func TestRWMutexReadersShare(t *testing.T) {
	s := newSched(t, Options{})
	var rw RWMutex
	rw.RLock()
	if !rw.TryRLock() {
		t.Fatal("TryRLock failed while only readers hold it")
	}
	if rw.TryLock() {
		t.Fatal("TryLock succeeded while readers hold it")
	}
	got := make(chan struct{})
	s.Go(func(context.Context) error { rw.RLock(); close(got); return nil })
	waitDone(t, got, 5*time.Second, "a third reader")
	var wrote atomic.Bool
	w, _ := s.Go(func(context.Context) error { rw.Lock(); wrote.Store(true); rw.Unlock(); return nil })
	time.Sleep(5 * time.Millisecond)
	for range 2 {
		if wrote.Load() {
			t.Fatal("a writer got in while readers held the lock")
		}
		rw.RUnlock()
	}
	rw.RUnlock() // the virtual thread's
	w.Join()
	if !wrote.Load() || !rw.TryLock() {
		t.Fatal("the writer did not finish, or left the lock held")
	}
	rw.Unlock()
}

func TestRWMutexMixed(t *testing.T) {
	s := newSched(t, Options{})
	var rw RWMutex
	var readers, writers atomic.Int32
	x, y := 0, 0
	n := iters(1000, 200)
	mixed(t, s, 40, 8, func(id int) {
		for i := range n {
			if id%4 == 0 {
				rw.Lock()
				if writers.Add(1) != 1 || readers.Load() != 0 {
					t.Error("a writer is not alone")
				}
				x++
				pause(i)
				y++
				writers.Add(-1)
				rw.Unlock()
			} else {
				rw.RLock()
				readers.Add(1)
				if writers.Load() != 0 {
					t.Error("a reader and a writer at once")
				}
				if x != y {
					t.Error("a reader saw a half-done write")
				}
				if i%4 == 0 {
					pause(i)
				}
				readers.Add(-1)
				rw.RUnlock()
			}
		}
	})
	if want := 12 * n; x != want || y != want {
		t.Fatalf("x, y = %d, %d, want %d", x, y, want)
	}
}

// TestRWMutexWriterNotStarved: two readers hand the read lock to each other
// so that one of them always holds it. Only writer preference (new readers
// wait once a writer waits) lets the writer in.
func TestRWMutexWriterNotStarved(t *testing.T) {
	s := newSched(t, Options{})
	var rw RWMutex
	var stop atomic.Bool
	var wg sync.WaitGroup
	// batons[i] tells reader i that the other reader has the read lock.
	batons := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	rw.RLock() // reader 0 starts holding it
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other := 1 - i
			holding := i == 0
			for !stop.Load() {
				if !holding {
					rw.RLock()
				}
				select { // "I hold it: you may let go"
				case batons[other] <- struct{}{}:
				default: // already said
				}
				// Let go once the other reader holds it too, or after a
				// while if it cannot get in (a writer is waiting).
				select {
				case <-batons[i]:
				case <-time.After(2 * time.Millisecond):
				}
				rw.RUnlock()
				holding = false
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	got := make(chan struct{})
	s.Go(func(context.Context) error { rw.Lock(); rw.Unlock(); close(got); return nil })
	waitDone(t, got, 5*time.Second, "a writer against overlapping readers")
	stop.Store(true)
	wg.Wait()
}

// TestRWMutexReadersBeforeNextWriter: readers that queued while a writer
// held the lock go before a writer that queued after them.
func TestRWMutexReadersBeforeNextWriter(t *testing.T) {
	s := newSched(t, Options{})
	var rw RWMutex
	var mu sync.Mutex
	var order []string
	record := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
	rw.Lock()
	r, _ := s.Go(func(context.Context) error {
		rw.RLock()
		record("reader")
		Sleep(10 * time.Millisecond)
		rw.RUnlock()
		return nil
	})
	time.Sleep(5 * time.Millisecond)
	w, _ := s.Go(func(context.Context) error { rw.Lock(); record("writer"); rw.Unlock(); return nil })
	time.Sleep(5 * time.Millisecond)
	rw.Unlock()
	r.Join()
	w.Join()
	if len(order) != 2 || order[0] != "reader" {
		t.Fatalf("order %v, want the reader first", order)
	}
}
