package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestChanCloseRaceExactlyOnce: senders (plain Send, SendTimeout,
// SendContext, select send) race a Close. A value is received iff its
// sender reported success; a sender that panicked or failed must not have
// had its value received.
func TestChanCloseRaceExactlyOnce(t *testing.T) {
	s := newSched(t, Options{})
	rounds := iters(300, 60)
	for r := range rounds {
		c := NewChan[int](r % 3)
		const ns = 16
		var status [ns]atomic.Int32 // 1 sent, 2 failed, 3 panicked
		var recvd [ns]atomic.Int32
		var wg sync.WaitGroup
		send := func(i int) {
			defer wg.Done()
			defer func() {
				if recover() != nil {
					status[i].Store(3)
				}
			}()
			ok := true
			switch i % 4 {
			case 0:
				c.Send(i)
			case 1:
				ok = c.SendTimeout(i, time.Duration(rand.IntN(200))*time.Microsecond)
			case 2:
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(200))*time.Microsecond)
				ok = c.SendContext(ctx, i) == nil
				cancel()
			case 3:
				j, _ := SelectTimeout(time.Duration(1+rand.IntN(200))*time.Microsecond, SendCase(c, i))
				ok = j == 0
			}
			if ok {
				status[i].Store(1)
			} else {
				status[i].Store(2)
			}
		}
		recv := func() {
			defer wg.Done()
			for {
				v, ok := c.Recv()
				if !ok {
					return
				}
				recvd[v].Add(1)
			}
		}
		wg.Add(ns + 4)
		for i := range ns {
			if i%2 == 0 {
				s.Go(func(context.Context) error { send(i); return nil })
			} else {
				go send(i)
			}
		}
		for k := range 4 {
			if k%2 == 0 {
				s.Go(func(context.Context) error { recv(); return nil })
			} else {
				go recv()
			}
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		c.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		if !waitDone(t, done, 10*time.Second, fmt.Sprintf("round %d", r)) {
			return
		}
		for i := range ns {
			st, n := status[i].Load(), recvd[i].Load()
			if n > 1 || (st == 1) != (n == 1) {
				t.Fatalf("round %d: value %d: status %d, received %d times", r, i, st, n)
			}
		}
	}
}

// TestSelectContextExactlyOnce: like TestSelectStress, with
// SelectContext, RecvContext and SendContext cancellations.
func TestSelectContextExactlyOnce(t *testing.T) {
	s := newSched(t, Options{})
	chans := []*Chan[int]{NewChan[int](0), NewChan[int](0), NewChan[int](1)}
	const producers = 6
	per := iters(2000, 300)
	total := producers * per
	seen := make([]atomic.Int32, total)
	var received atomic.Int64
	var wg sync.WaitGroup
	produce := func(p int) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(p), 7))
		for k := range per {
			v := p*per + k
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(100))*time.Microsecond)
				a, b := r.IntN(len(chans)), r.IntN(len(chans))
				var sent bool
				if k%2 == 0 {
					i, _, _ := SelectContext(ctx, SendCase(chans[a], v), SendCase(chans[b], v))
					sent = i >= 0
				} else {
					sent = chans[a].SendContext(ctx, v) == nil
				}
				cancel()
				if sent {
					break
				}
			}
		}
	}
	consume := func(c int) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(c), 8))
		var vs [3]int
		for received.Load() < int64(total) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(150))*time.Microsecond)
			var v int
			got := false
			if r.IntN(2) == 0 {
				i, _, _ := SelectContext(ctx, RecvCase(chans[0], &vs[0]), RecvCase(chans[1], &vs[1]), RecvCase(chans[2], &vs[2]))
				if i >= 0 {
					v, got = vs[i], true
				}
			} else {
				x, _, err := chans[r.IntN(3)].RecvContext(ctx)
				if err == nil {
					v, got = x, true
				}
			}
			cancel()
			if !got {
				continue
			}
			if n := seen[v].Add(1); n != 1 {
				t.Errorf("value %d received %d times", v, n)
			}
			received.Add(1)
		}
	}
	wg.Add(2 * producers)
	for p := range producers {
		if p%2 == 0 {
			s.Go(func(context.Context) error { produce(p); return nil })
			go consume(p)
		} else {
			go produce(p)
			s.Go(func(context.Context) error { consume(p); return nil })
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if !waitDone(t, done, 60*time.Second, "select ctx stress") {
		return
	}
	for v := range seen {
		if seen[v].Load() != 1 {
			t.Fatalf("value %d received %d times", v, seen[v].Load())
		}
	}
}

// TestSemaphoreCancelStress: acquirers with random deadlines and
// sizes; the held total never exceeds the size, and no token leaks.
func TestSemaphoreCancelStress(t *testing.T) {
	s := newSched(t, Options{})
	const size = 5
	sem := NewSemaphore(size)
	var held atomic.Int64
	mixed(t, s, 16, 6, func(id int) {
		r := rand.New(rand.NewPCG(uint64(id), 3))
		for i := range iters(400, 100) {
			n := int64(1 + r.IntN(size))
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
			err := sem.Acquire(ctx, n)
			cancel()
			if err != nil {
				continue
			}
			if h := held.Add(n); h > size {
				t.Errorf("%d tokens held, size %d", h, size)
			}
			pause(i)
			held.Add(-n)
			sem.Release(n)
		}
	})
	if !sem.TryAcquire(size) {
		t.Fatal("tokens leaked")
	}
}

// TestRWMutexExclusion: readers and writers, vthreads and goroutines,
// with Try variants; no writer overlaps anyone.
func TestRWMutexExclusion(t *testing.T) {
	s := newSched(t, Options{})
	var rw RWMutex
	var readers, writers atomic.Int32
	mixed(t, s, 24, 8, func(id int) {
		for i := range iters(600, 150) {
			switch (id + i) % 5 {
			case 0, 1:
				rw.RLock()
				if writers.Load() != 0 {
					t.Error("reader with a writer")
				}
				readers.Add(1)
				pause(i)
				readers.Add(-1)
				rw.RUnlock()
			case 2:
				if rw.TryRLock() {
					if writers.Load() != 0 {
						t.Error("try-reader with a writer")
					}
					rw.RUnlock()
				}
			case 3:
				rw.Lock()
				if writers.Add(1) != 1 || readers.Load() != 0 {
					t.Error("writer not alone")
				}
				pause(i)
				writers.Add(-1)
				rw.Unlock()
			case 4:
				if rw.TryLock() {
					if writers.Add(1) != 1 || readers.Load() != 0 {
						t.Error("try-writer not alone")
					}
					writers.Add(-1)
					rw.Unlock()
				}
			}
		}
	})
}

// TestCondBroadcastMixed: a Cond over a Mutex with mixed waiters.
func TestCondBroadcastMixed(t *testing.T) {
	s := newSched(t, Options{})
	var m Mutex
	c := NewCond(&m)
	gen := 0
	rounds := iters(500, 100)
	var wg sync.WaitGroup
	wait := func() {
		defer wg.Done()
		for g := 1; g <= rounds; g++ {
			m.Lock()
			for gen < g {
				c.Wait()
			}
			m.Unlock()
		}
	}
	wg.Add(8)
	for i := range 8 {
		if i%2 == 0 {
			s.Go(func(context.Context) error { wait(); return nil })
		} else {
			go wait()
		}
	}
	for range rounds {
		m.Lock()
		gen++
		m.Unlock()
		if gen%2 == 0 {
			c.Broadcast()
		} else {
			for range 8 {
				c.Signal()
			}
			c.Broadcast()
		}
		time.Sleep(10 * time.Microsecond)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, done, 20*time.Second, "cond waiters")
}

// TestMutexStarvationDeterministic: in deterministic mode the virtual
// clock only moves when every virtual thread waits for a timer, so a
// woken waiter can never see 1 ms pass. A holder that yields while holding
// the lock and relocks right after unlocking would win every race against
// it, for the holder's whole loop, against the doc's "So no waiter
// starves": a woken waiter that loses there switches the Mutex to handoff
// mode at once.
func TestMutexStarvationDeterministic(t *testing.T) {
	for seed := range uint64(5) {
		s := newSched(t, Options{Deterministic: true, Seed: seed})
		var m Mutex
		const n = 20000
		holds := 0 // one carrier: no data race
		passed := -1
		a, _ := s.Go(func(context.Context) error {
			var b *VThread
			for i := range n {
				m.Lock()
				if i == 0 {
					// Started here, so that it waits from the holder's
					// first hold, whatever the test goroutine does.
					b, _ = s.Go(func(context.Context) error {
						m.Lock()
						passed = holds
						m.Unlock()
						return nil
					})
				}
				holds++
				Yield() // the waiter runs meanwhile, and finds it locked
				m.Unlock()
			}
			return b.Join()
		})
		if err := a.Join(); err != nil {
			t.Fatal(err)
		}
		if passed < 0 || passed > 10 {
			t.Fatalf("seed %d: the waiter got the Mutex after %d of the holder's %d holds: starved", seed, passed, n)
		}
	}
}

// TestZeroChanSelect: two zero-value Chans (not made by NewChan) must get
// ids of their own: with one id, a select over both would lock only one
// of them (sortLocks drops the "repeat") and work on the other's queues
// unlocked, which the race detector reports, and which can lose or
// duplicate values without it.
func TestZeroChanSelect(t *testing.T) {
	var a, b Chan[int]
	var wg sync.WaitGroup
	const n = 2000
	var got atomic.Int64
	wg.Add(3)
	go func() { // plain sends on b, under b's own lock
		defer wg.Done()
		for i := range n {
			b.Send(i)
		}
	}()
	go func() { // plain sends on a
		defer wg.Done()
		for i := range n {
			a.Send(i)
		}
	}()
	go func() {
		defer wg.Done()
		for got.Load() < 2*n {
			if i, _ := SelectTimeout(time.Millisecond, RecvCase(&a, nil), RecvCase(&b, nil)); i >= 0 {
				got.Add(1)
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, done, 20*time.Second, "zero-value Chan select")
	if ida, idb := a.chanID(), b.chanID(); ida == idb {
		t.Errorf("two zero-value Chans share id %d: a select over both locks only one", ida)
	}
}

// TestDetChanCloseRace: TestChanCloseRaceExactlyOnce's
// checks in deterministic mode, virtual threads only, many seeds.
func TestDetChanCloseRace(t *testing.T) {
	for seed := range uint64(iters(200, 40)) {
		s, err := New(Options{Deterministic: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		c := NewChan[int](int(seed % 3))
		const ns = 12
		var status [ns]int
		var recvd [ns]int
		var vts []*VThread
		for i := range ns {
			vt, _ := s.Go(func(ctx context.Context) error {
				defer func() {
					if recover() != nil {
						status[i] = 3
					}
				}()
				ok := true
				switch i % 4 {
				case 0:
					c.Send(i)
				case 1:
					ok = c.SendTimeout(i, time.Duration(i)*time.Microsecond)
				case 2:
					cctx, cancel := context.WithCancel(context.Background())
					if i%3 == 0 {
						cancel()
					}
					ok = c.SendContext(cctx, i) == nil
					cancel()
				case 3:
					j, _ := SelectTimeout(time.Duration(1+i)*time.Microsecond, SendCase(c, i))
					ok = j == 0
				}
				if ok {
					status[i] = 1
				} else {
					status[i] = 2
				}
				return nil
			})
			vts = append(vts, vt)
		}
		for range 3 {
			vt, _ := s.Go(func(ctx context.Context) error {
				for {
					var v int
					i, ok := SelectTimeout(5*time.Microsecond, RecvCase(c, &v))
					if i < 0 {
						continue
					}
					if !ok {
						return nil
					}
					recvd[v]++
				}
			})
			vts = append(vts, vt)
		}
		vt, _ := s.Go(func(ctx context.Context) error {
			Sleep(time.Duration(seed%20) * time.Microsecond)
			c.Close()
			return nil
		})
		vts = append(vts, vt)
		for _, vt := range vts {
			vt.Join()
		}
		s.Close()
		for i := range ns {
			if recvd[i] > 1 || (status[i] == 1) != (recvd[i] == 1) {
				t.Fatalf("seed %d: value %d: status %d, received %d", seed, i, status[i], recvd[i])
			}
		}
	}
}

// TestCondWaitMisuseLeavesNoWaiter: Wait without holding L panics in
// L.Unlock (recoverable here, where sync.Cond's is a fatal error) after it
// has queued its waiter. The waiter must leave the queue with the panic:
// left there, it would take the next Signal, and the real waiter behind it
// would not be woken.
func TestCondWaitMisuseLeavesNoWaiter(t *testing.T) {
	var m Mutex
	c := NewCond(&m)
	mustPanic(t, c.Wait) // L not held
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for w := c.q.head; w != nil; w = w.next {
			n++
		}
		return n
	}
	if n := queued(); n != 0 {
		t.Fatalf("%d waiters queued after a Wait that panicked, want 0", n)
	}
	woke := make(chan struct{})
	go func() {
		m.Lock()
		c.Wait()
		m.Unlock()
		close(woke)
	}()
	for queued() != 1 {
		time.Sleep(100 * time.Microsecond)
	}
	m.Lock() // the real waiter has released it
	m.Unlock()
	c.Signal()
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		c.Signal() // let the goroutine go
		<-woke
		t.Fatal("Signal did not wake the real waiter")
	}
}

// TestDetStoppedTimersRetained: in deterministic mode a timed wait that
// ends early stops its virtual timer, which must leave the heap: kept
// there (with its closure, waiter and VThread) until the virtual clock
// reached its deadline, a ping-pong with hour-long timeouts beside a
// ticking virtual thread would keep every one of them.
func TestDetStoppedTimersRetained(t *testing.T) {
	s := newSched(t, Options{Deterministic: true, Seed: 1})
	const n = 50000
	ping, pong := NewChan[int](0), NewChan[int](0)
	stop := NewChan[int](0)
	ticker, _ := s.Go(func(context.Context) error {
		for {
			if _, _, ready := stop.RecvTimeout(time.Millisecond); ready {
				return nil
			}
		}
	})
	a, _ := s.Go(func(context.Context) error {
		for i := range n {
			if !ping.SendTimeout(i, time.Hour) {
				return fmt.Errorf("send %d timed out", i)
			}
			if _, _, ready := pong.RecvTimeout(time.Hour); !ready {
				return fmt.Errorf("recv %d timed out", i)
			}
		}
		return nil
	})
	b, _ := s.Go(func(context.Context) error {
		for range n {
			v, _, _ := ping.RecvTimeout(time.Hour)
			pong.SendTimeout(v, time.Hour)
		}
		return nil
	})
	if err := a.Join(); err != nil {
		t.Fatal(err)
	}
	b.Join()
	s.det.mu.Lock()
	kept := len(s.det.timers)
	s.det.mu.Unlock()
	stop.Send(0)
	ticker.Join()
	if kept > 1000 {
		t.Fatalf("%d virtual timers in the heap after %d round trips, nearly all stopped", kept, n)
	}
}
