package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newSched is newTest whose cleanup does not hang for ever when a failing
// test leaves virtual threads blocked: it reports them and moves on.
func newSched(t *testing.T, opts Options) *Scheduler {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Shutdown hung: %d virtual threads still blocked", s.Live())
		}
	})
	return s
}

// waitDone fails the test if done is not closed within d.
func waitDone(t *testing.T, done <-chan struct{}, d time.Duration, what string) bool {
	t.Helper()
	select {
	case <-done:
		return true
	case <-time.After(d):
		t.Errorf("%s: not done after %v (a lost wake-up?)", what, d)
		return false
	}
}

// mixed runs fn(i) for i in [0, nv) in virtual threads of s and for i in
// [nv, nv+ng) in plain goroutines, and waits for them all.
func mixed(t *testing.T, s *Scheduler, nv, ng int, fn func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(nv + ng)
	for i := range nv {
		if _, err := s.Go(func(context.Context) error {
			defer wg.Done()
			fn(i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ng {
		go func() {
			defer wg.Done()
			fn(nv + i)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if !waitDone(t, done, 60*time.Second, "workers") {
		t.FailNow()
	}
}

// pause gives others a chance to run: a virtual thread yields, and every
// few calls a goroutine sleeps.
func pause(i int) {
	if Current() != nil || i%4 != 0 {
		Yield()
	} else {
		time.Sleep(time.Microsecond)
	}
}

func iters(long, short int) int {
	if testing.Short() || raceEnabled {
		return short
	}
	return long
}

// mustPanic calls f and returns the message it panicked with, failing the
// test if it did not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Errorf("did not panic")
			return
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

// carrierFree checks that a virtual thread blocked in block leaves the only
// carrier free: another virtual thread must run meanwhile. release unblocks
// it; it runs on the test goroutine.
func carrierFree(t *testing.T, block func(), release func()) {
	t.Helper()
	s := newSched(t, Options{Carriers: 1, MaxCompensation: -1})
	var started, finished atomic.Bool
	a, _ := s.Go(func(context.Context) error {
		started.Store(true)
		block()
		finished.Store(true)
		return nil
	})
	for !started.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(2 * time.Millisecond)
	ran := make(chan struct{})
	b, _ := s.Go(func(context.Context) error {
		close(ran)
		return nil
	})
	ok := waitDone(t, ran, 5*time.Second, "a second virtual thread on the one carrier")
	if ok && finished.Load() {
		t.Errorf("the blocking operation did not block")
	}
	release()
	done := make(chan struct{})
	go func() { a.Join(); b.Join(); close(done) }()
	waitDone(t, done, 5*time.Second, "released virtual thread")
}

func TestSyncCarrierFree(t *testing.T) {
	t.Run("Mutex", func(t *testing.T) {
		var m Mutex
		m.Lock()
		carrierFree(t, func() { m.Lock(); m.Unlock() }, m.Unlock)
	})
	t.Run("RWMutex.Lock", func(t *testing.T) {
		var m RWMutex
		m.RLock()
		carrierFree(t, func() { m.Lock(); m.Unlock() }, m.RUnlock)
	})
	t.Run("RWMutex.RLock", func(t *testing.T) {
		var m RWMutex
		m.Lock()
		carrierFree(t, func() { m.RLock(); m.RUnlock() }, m.Unlock)
	})
	t.Run("WaitGroup", func(t *testing.T) {
		var wg WaitGroup
		wg.Add(1)
		carrierFree(t, wg.Wait, wg.Done)
	})
	t.Run("Cond", func(t *testing.T) {
		var m Mutex
		c := NewCond(&m)
		ready := false
		carrierFree(t, func() {
			m.Lock()
			for !ready {
				c.Wait()
			}
			m.Unlock()
		}, func() {
			m.Lock()
			ready = true
			c.Signal()
			m.Unlock()
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		sem := NewSemaphore(1)
		sem.Acquire(context.Background(), 1)
		carrierFree(t, func() {
			if err := sem.Acquire(context.Background(), 1); err != nil {
				t.Error(err)
			}
		}, func() { sem.Release(1) })
	})
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

func TestWaitGroup(t *testing.T) {
	s := newSched(t, Options{})
	var wg WaitGroup
	wg.Wait() // zero: returns at once
	const workers = 50
	var finished atomic.Int32
	wg.Add(workers)
	for i := range workers {
		if i%2 == 0 {
			s.Go(func(context.Context) error { Sleep(time.Millisecond); finished.Add(1); wg.Done(); return nil })
		} else {
			go func() { time.Sleep(time.Millisecond); finished.Add(1); wg.Done() }()
		}
	}
	var bad atomic.Int32
	mixed(t, s, 5, 3, func(int) {
		wg.Wait()
		if finished.Load() != workers {
			bad.Add(1)
		}
	})
	if bad.Load() != 0 {
		t.Fatalf("%d Waits returned before the counter reached zero", bad.Load())
	}
	if msg := mustPanic(t, wg.Done); !strings.Contains(msg, "negative WaitGroup counter") {
		t.Fatalf("panic %q", msg)
	}
	// Go.
	var ran atomic.Int32
	for range 10 {
		if _, err := wg.Go(s, func(context.Context) error { ran.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, done, 5*time.Second, "WaitGroup.Go")
	if ran.Load() != 10 {
		t.Fatalf("ran %d", ran.Load())
	}
}

func TestWaitGroupRounds(t *testing.T) {
	s := newSched(t, Options{})
	rounds := iters(3000, 500)
	main, _ := s.Go(func(context.Context) error {
		for r := range rounds {
			var wg WaitGroup
			wg.Add(2)
			s.Go(func(context.Context) error { wg.Done(); return nil })
			go wg.Done()
			wg.Wait()
			if r%100 == 0 {
				Yield()
			}
		}
		return nil
	})
	done := make(chan struct{})
	go func() { main.Join(); close(done) }()
	waitDone(t, done, 60*time.Second, "WaitGroup rounds")
}

func testCond(t *testing.T, l sync.Locker) {
	s := newSched(t, Options{})
	c := NewCond(l)
	const n = 8 // half virtual threads, half goroutines
	var waiting, wakes, passed int
	tokens := 0
	var wg sync.WaitGroup
	wg.Add(n)
	body := func() {
		defer wg.Done()
		l.Lock()
		waiting++
		for tokens == 0 {
			c.Wait()
			wakes++
		}
		tokens--
		passed++
		l.Unlock()
	}
	for i := range n {
		if i%2 == 0 {
			s.Go(func(context.Context) error { body(); return nil })
		} else {
			go body()
		}
	}
	snapshot := func() (int, int, int) {
		l.Lock()
		defer l.Unlock()
		return waiting, wakes, passed
	}
	deadline := time.Now().Add(5 * time.Second)
	for w, _, _ := snapshot(); w < n; w, _, _ = snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d waiters arrived", w, n)
		}
		time.Sleep(time.Millisecond)
	}
	l.Lock()
	tokens = 1
	c.Signal()
	l.Unlock()
	for _, _, p := snapshot(); p < 1; _, _, p = snapshot() {
		if time.Now().After(deadline) {
			t.Fatal("Signal woke nobody")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if _, wk, p := snapshot(); wk != 1 || p != 1 {
		t.Fatalf("after one Signal: %d wakes, %d passed; want 1, 1", wk, p)
	}
	l.Lock()
	tokens = n - 1
	c.Broadcast()
	l.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, done, 5*time.Second, "Broadcast")
	if _, wk, p := snapshot(); wk != n || p != n {
		t.Fatalf("after Broadcast: %d wakes, %d passed; want %d, %d", wk, p, n, n)
	}
}

func TestCond(t *testing.T) {
	t.Run("Mutex", func(t *testing.T) { testCond(t, &Mutex{}) })
	t.Run("RWMutex", func(t *testing.T) { testCond(t, &RWMutex{}) })
	t.Run("sync.Mutex", func(t *testing.T) { testCond(t, &sync.Mutex{}) })
}

// TestCondNoLostWakeups alternates turns between a virtual thread and a
// goroutine, and between two virtual threads, many times.
func TestCondNoLostWakeups(t *testing.T) {
	s := newSched(t, Options{})
	rounds := iters(20000, 2000)
	for _, mode := range []string{"vthread-goroutine", "vthread-vthread"} {
		var m Mutex
		c := NewCond(&m)
		turn := 0
		player := func(me int) {
			for range rounds {
				m.Lock()
				for turn != me {
					c.Wait()
				}
				turn = 1 - me
				c.Signal()
				m.Unlock()
			}
		}
		a, _ := s.Go(func(context.Context) error { player(0); return nil })
		done := make(chan struct{})
		if mode == "vthread-goroutine" {
			go func() { player(1); a.Join(); close(done) }()
		} else {
			b, _ := s.Go(func(context.Context) error { player(1); return nil })
			go func() { a.Join(); b.Join(); close(done) }()
		}
		waitDone(t, done, 60*time.Second, mode)
	}
}

func TestSemaphoreLimit(t *testing.T) {
	s := newSched(t, Options{})
	sem := NewSemaphore(3)
	var inside, most atomic.Int32
	mixed(t, s, 24, 6, func(id int) {
		for i := range iters(200, 50) {
			if err := sem.Acquire(context.Background(), 1); err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			pause(i)
			inside.Add(-1)
			sem.Release(1)
		}
	})
	if most.Load() > 3 {
		t.Fatalf("%d holders at once, limit 3", most.Load())
	}
	if !sem.TryAcquire(3) {
		t.Fatal("tokens leaked")
	}
	if sem.TryAcquire(1) {
		t.Fatal("TryAcquire beyond the size succeeded")
	}
	sem.Release(3)
	if msg := mustPanic(t, func() { sem.Release(1) }); !strings.Contains(msg, "more tokens than held") {
		t.Fatalf("panic %q", msg)
	}
}

func TestSemaphoreCancel(t *testing.T) {
	s := newSched(t, Options{})
	sem := NewSemaphore(2)
	if err := sem.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	// Blocked Acquires, in a virtual thread and a goroutine, end with
	// their contexts.
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	s.Go(func(context.Context) error { errs <- sem.Acquire(ctx, 1); return nil })
	go func() { errs <- sem.Acquire(ctx, 1) }()
	time.Sleep(5 * time.Millisecond)
	cancel()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled Acquire did not return")
		}
	}
	// A deadline in a virtual thread.
	vt, _ := s.Go(func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		return sem.Acquire(ctx, 1)
	})
	if err := vt.Join(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want DeadlineExceeded", err)
	}
	// An already cancelled context fails even when tokens are free.
	sem.Release(2)
	if err := sem.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a done context = %v", err)
	}
	// No token leaked.
	if !sem.TryAcquire(2) {
		t.Fatal("tokens leaked by cancelled Acquires")
	}
	// A cancelled large request at the head lets a smaller one behind it
	// through.
	big, cancelBig := context.WithCancel(context.Background())
	bigErr := make(chan error, 1)
	s.Go(func(context.Context) error { bigErr <- sem.Acquire(big, 2); return nil })
	time.Sleep(5 * time.Millisecond)
	small := make(chan error, 1)
	s.Go(func(context.Context) error { small <- sem.Acquire(context.Background(), 1); return nil })
	time.Sleep(5 * time.Millisecond)
	sem.Release(1)
	select {
	case <-small:
		t.Fatal("a small request overtook a larger one at the head")
	case <-time.After(5 * time.Millisecond):
	}
	cancelBig()
	if err := <-bigErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("big Acquire = %v", err)
	}
	select {
	case err := <-small:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the small request stayed blocked behind a cancelled one")
	}
	sem.Release(2)
	// A request larger than the semaphore waits for its context.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel2()
	if err := sem.Acquire(ctx2, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("oversized Acquire = %v", err)
	}
}

// A grant that races with the waiter's context ending: Acquire returns
// ctx.Err() and gives the tokens back, waking the waiter behind it, as
// golang.org/x/sync/semaphore does; it does not keep them and return nil.
//
// Deterministic mode forces the race: a context cancelled by a virtual
// thread is seen by the waits on it at the carrier's next scheduling
// decision (watchContext), so a thread that cancels the waiter's context
// and then releases, in one run, grants the tokens to a waiter whose
// context has already ended.
func TestSemaphoreGrantRacesCancel(t *testing.T) {
	for seed := range uint64(8) {
		s := newSched(t, Options{Deterministic: true, Seed: seed})
		sem := NewSemaphore(2)
		if !sem.TryAcquire(2) {
			t.Fatal("TryAcquire on a new semaphore failed")
		}
		ctx, cancel := context.WithCancel(context.Background())
		var errCancelled, errBehind error
		root := goOrFatal(t, s, func(context.Context) error {
			// Started from a virtual thread, so that the carrier runs
			// none before all have started.
			cancelled, err := s.Go(func(context.Context) error {
				errCancelled = sem.Acquire(ctx, 2)
				if errCancelled == nil {
					sem.Release(2)
				}
				return nil
			})
			if err != nil {
				return err
			}
			behind, err := s.Go(func(context.Context) error {
				Sleep(time.Millisecond) // queued behind the first
				errBehind = sem.Acquire(context.Background(), 1)
				if errBehind == nil {
					sem.Release(1)
				}
				return nil
			})
			if err != nil {
				return err
			}
			releaser, err := s.Go(func(context.Context) error {
				Sleep(2 * time.Millisecond) // both are queued
				cancel()
				sem.Release(2) // granted to the first, whose ctx has ended
				return nil
			})
			if err != nil {
				return err
			}
			for _, vt := range []*VThread{cancelled, behind, releaser} {
				if err := vt.Join(); err != nil {
					return err
				}
			}
			return nil
		})
		if err := joinWithin(t, root); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(errCancelled, context.Canceled) {
			t.Errorf("seed %d: Acquire granted as its context ended = %v, want context.Canceled", seed, errCancelled)
		}
		if errBehind != nil {
			t.Errorf("seed %d: the Acquire behind it = %v, want nil", seed, errBehind)
		}
		if !sem.TryAcquire(2) {
			t.Errorf("seed %d: TryAcquire(2) failed after every holder released: tokens lost", seed)
		} else {
			sem.Release(2)
		}
	}
}

// The same race outside deterministic mode, for a waiting virtual thread
// and a waiting goroutine: a context cancelled before the Release that
// grants the tokens fails the Acquire, whichever wins the race to end its
// wait (the grant, which the Acquire then undoes, or the context), and no
// token is lost.
func TestSemaphoreCancelBeforeRelease(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	for round := range 100 {
		sem := NewSemaphore(1)
		if !sem.TryAcquire(1) {
			t.Fatal("TryAcquire on a new semaphore failed")
		}
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		if round%2 == 0 {
			go func() { res <- sem.Acquire(ctx, 1) }()
		} else if _, err := s.Go(func(context.Context) error { res <- sem.Acquire(ctx, 1); return nil }); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the Acquire to queue", func() bool {
			sem.mu.Lock()
			defer sem.mu.Unlock()
			return sem.head != nil
		})
		cancel()
		sem.Release(1)
		select {
		case err := <-res:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: Acquire whose context was cancelled before the Release = %v, want context.Canceled", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Acquire did not return", round)
		}
		if !sem.TryAcquire(1) {
			t.Fatalf("round %d: TryAcquire(1) failed after the cancelled Acquire returned: a token lost", round)
		}
	}
}
