package scheduler

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAuditWaitGroupGoNilScheduler: WaitGroup.Go adds one to the counter
// before it calls s.Go; if that panics (a nil *Scheduler), the counter
// must not stay raised, or every later Wait hangs.
func TestAuditWaitGroupGoNilScheduler(t *testing.T) {
	var wg WaitGroup
	msg := mustPanic(t, func() {
		wg.Go(nil, func(context.Context) error { return nil })
	})
	if !strings.Contains(msg, "Scheduler") {
		t.Errorf("panic %q does not say what was wrong", msg)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		wg.Done()
		t.Fatalf("Wait hangs after a WaitGroup.Go that panicked: counter left at 1")
	}
}

// TestAuditSelectManyCases: a select of more than selectSmall cases,
// with repeats of the same channel, blocks and is woken by a case past
// the eighth.
func TestAuditSelectManyCases(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	const n = 20
	chans := make([]*Chan[int], n)
	for i := range chans {
		chans[i] = NewChan[int](0)
	}
	run := func(target int) error {
		dst := make([]int, 2*n)
		cases := make([]Case, 0, 2*n)
		for i := range n {
			cases = append(cases, RecvCase(chans[i], &dst[2*i]))
			cases = append(cases, RecvCase(chans[i], &dst[2*i+1])) // repeat
		}
		i, ok := Select(cases...)
		if i/2 != target || !ok || dst[i] != 100+target {
			return fmt.Errorf("Select = %d, %v, value %d; want case %d or %d with %d", i, ok, dst[i], 2*target, 2*target+1, 100+target)
		}
		for k := range n {
			if r, sd := queued(chans[k]); r != 0 || sd != 0 {
				return fmt.Errorf("chan %d: %d receivers, %d senders left queued", k, r, sd)
			}
		}
		return nil
	}
	for _, target := range []int{0, 9, 15, 19} {
		vt, _ := s.Go(func(context.Context) error { return run(target) })
		waitQueued(t, chans[target], 2, 0)
		chans[target].Send(100 + target)
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- run(target) }()
		waitQueued(t, chans[target], 2, 0)
		chans[target].Send(100 + target)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// auditDetRun runs a program that uses every synchronisation type on a
// deterministic scheduler and returns its trace.
func auditDetRun(t *testing.T, seed uint64) []string {
	s := newSched(t, Options{Deterministic: true, Seed: seed})
	var mu sync.Mutex
	var trace []string
	log := func(f string, a ...any) {
		mu.Lock()
		trace = append(trace, fmt.Sprintf("%v ", s.Now().Sub(epoch))+fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	root, _ := s.Go(func(ctx context.Context) error {
		var m Mutex
		var rw RWMutex
		cond := NewCond(&m)
		sem := NewSemaphore(3)
		ch := NewChan[int](1)
		var wg WaitGroup
		turn := 0
		for p := range 6 {
			wg.Go(s, func(context.Context) error {
				for k := range 5 {
					m.Lock()
					log("m %d.%d", p, k)
					Yield()
					m.Unlock()
					if p%2 == 0 {
						rw.RLock()
						log("r %d.%d", p, k)
						Yield()
						rw.RUnlock()
					} else {
						rw.Lock()
						log("w %d.%d", p, k)
						rw.Unlock()
					}
					cctx, cancel := context.WithCancel(context.Background())
					if k == 2 {
						cancel()
					}
					if err := sem.Acquire(cctx, int64(1+p%3)); err == nil {
						log("sem %d.%d", p, k)
						Sleep(time.Duration(p) * time.Microsecond)
						sem.Release(int64(1 + p%3))
					} else {
						log("sem %d.%d %v", p, k, err)
					}
					cancel()
					if ch.SendTimeout(p*10+k, time.Duration(p+1)*time.Microsecond) {
						log("sent %d.%d", p, k)
					}
					var v int
					if i, _ := SelectTimeout(time.Duration(k+1)*time.Microsecond, RecvCase(ch, &v)); i >= 0 {
						log("got %d by %d", v, p)
					}
				}
				m.Lock()
				for turn != p {
					cond.Wait()
				}
				turn++
				log("turn %d", p)
				cond.Broadcast()
				m.Unlock()
				return nil
			})
		}
		wg.Wait()
		return nil
	})
	if err := root.Join(); err != nil {
		t.Fatal(err)
	}
	return trace
}

func TestAuditDetSyncReproducible(t *testing.T) {
	for seed := range uint64(5) {
		a := auditDetRun(t, seed)
		b := auditDetRun(t, seed)
		if !reflect.DeepEqual(a, b) {
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Fatalf("seed %d: runs differ at %d: %q vs %q", seed, i, a[i], b[i])
				}
			}
			t.Fatalf("seed %d: runs differ in length %d vs %d", seed, len(a), len(b))
		}
	}
}

// TestAuditMutexMixedStress: goroutines and virtual threads on one
// Mutex, with critical sections long enough to push it into handoff mode,
// never overlap and all finish.
func TestAuditMutexMixedStress(t *testing.T) {
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

// TestAuditDetCloseCancelsWaits: closing a deterministic scheduler
// cancels its threads' contexts, which must end their context waits on
// every type.
func TestAuditDetCloseCancelsWaits(t *testing.T) {
	for _, det := range []bool{false, true} {
		s, err := New(Options{Deterministic: det, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		ch, full, other := NewChan[int](0), NewChan[int](1), NewChan[int](0)
		full.Send(0)
		sem := NewSemaphore(1)
		sem.TryAcquire(1)
		var errs [5]atomic.Value
		var started atomic.Int32
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			_, _, err := ch.RecvContext(ctx)
			errs[0].Store(fmt.Sprint(err))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			errs[1].Store(fmt.Sprint(full.SendContext(ctx, 1)))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			_, _, err := SelectContext(ctx, RecvCase(other, nil), SendCase(full, 2))
			errs[2].Store(fmt.Sprint(err))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			errs[3].Store(fmt.Sprint(sem.Acquire(ctx, 1)))
			return nil
		})
		s.Go(func(ctx context.Context) error {
			started.Add(1)
			errs[4].Store(fmt.Sprint(sem.Acquire(ctx, 5))) // more than the size
			return nil
		})
		for started.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		done := make(chan struct{})
		go func() { s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("det=%v: Close hangs", det)
		}
		for i := range errs {
			if v := errs[i].Load(); v != "context canceled" {
				t.Errorf("det=%v: wait %d: %v", det, i, v)
			}
		}
	}
}

// TestAuditChanConservation: producers send unique values with every
// kind of send over three channels (unbuffered, buffered, zero Chan);
// consumers receive with every kind of receive; then the channels close
// and the consumers drain them. A value whose send reported success is
// received exactly once; one whose send reported failure never is; no
// waiter stays queued.
func TestAuditChanConservation(t *testing.T) {
	for _, det := range []bool{false, true} {
		t.Run(fmt.Sprint("det=", det), func(t *testing.T) {
			s := newSched(t, Options{Deterministic: det, Seed: 7, Carriers: 2})
			var zc Chan[int]
			chans := []*Chan[int]{NewChan[int](0), NewChan[int](2), &zc}
			const producers, consumers = 6, 6
			per := iters(3000, 400)
			total := producers * per
			sent := make([]atomic.Int32, total)
			got := make([]atomic.Int32, total)
			var closedSeen atomic.Int32
			var pwg sync.WaitGroup
			produce := func(p int) {
				defer pwg.Done()
				for k := range per {
					v := p*per + k
					c := chans[(p+k)%3]
					ok := false
					switch k % 6 {
					case 0:
						c.Send(v)
						ok = true
					case 1:
						ok = c.TrySend(v)
					case 2:
						ok = c.SendTimeout(v, time.Duration(k%7)*time.Microsecond)
					case 3:
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(k%5)*time.Microsecond)
						ok = c.SendContext(ctx, v) == nil
						cancel()
					case 4:
						i, _ := SelectTimeout(time.Duration(k%9)*time.Microsecond, SendCase(c, v), SendCase(chans[(p+k+1)%3], v), RecvCase[int](nil, nil))
						ok = i >= 0
					case 5:
						i, _ := TrySelect(SendCase(c, v), SendCase(chans[(p+k+2)%3], v))
						ok = i >= 0
					}
					if ok {
						sent[v].Add(1)
					}
				}
			}
			var cwg sync.WaitGroup
			consume := func(c0 int) {
				defer cwg.Done()
				var vs [3]int
				open := [3]bool{true, true, true}
				for k := 0; open[0] || open[1] || open[2]; k++ {
					c := c0 + k
					j := c % 3
					var v int
					var ok, ready bool
					switch c % 5 {
					case 0:
						if !open[j] {
							continue
						}
						v, ok, ready = chans[j].RecvTimeout(time.Duration(k%11) * time.Microsecond)
					case 1:
						if !open[j] {
							continue
						}
						v, ok, ready = chans[j].TryRecv()
					case 2:
						if !open[j] {
							continue
						}
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(k%13)*time.Microsecond)
						var err error
						v, ok, err = chans[j].RecvContext(ctx)
						ready = err == nil
						cancel()
					default:
						var cs [3]Case
						for i := range 3 {
							if open[i] {
								cs[i] = RecvCase(chans[i], &vs[i])
							}
						}
						var i int
						i, ok = SelectTimeout(time.Duration(1+k%17)*time.Microsecond, cs[:]...)
						if i >= 0 {
							j, v, ready = i, vs[i], true
						}
					}
					if !ready {
						continue
					}
					if !ok {
						if v != 0 {
							t.Errorf("closed receive gave %d", v)
						}
						open[j] = false
						closedSeen.Add(1)
						continue
					}
					got[v].Add(1)
				}
			}
			pwg.Add(producers)
			cwg.Add(consumers)
			for i := range producers {
				if i%2 == 0 {
					s.Go(func(context.Context) error { produce(i); return nil })
					go consume(i)
				} else {
					go produce(i)
					s.Go(func(context.Context) error { consume(i); return nil })
				}
			}
			pdone := make(chan struct{})
			go func() { pwg.Wait(); close(pdone) }()
			if !waitDone(t, pdone, 60*time.Second, "producers") {
				return
			}
			for _, c := range chans {
				c.Close()
			}
			cdone := make(chan struct{})
			go func() { cwg.Wait(); close(cdone) }()
			if !waitDone(t, cdone, 60*time.Second, "consumers") {
				return
			}
			nsent := 0
			for v := range total {
				sn, gn := sent[v].Load(), got[v].Load()
				if sn != gn {
					t.Errorf("value %d: send reported %d, received %d times", v, sn, gn)
				}
				nsent += int(sn)
			}
			for i, c := range chans {
				if r, sd := queued(c); r != 0 || sd != 0 {
					t.Errorf("chan %d: %d receivers, %d senders still queued", i, r, sd)
				}
			}
			t.Logf("%d of %d sent", nsent, total)
		})
	}
}

// TestAuditDetSeedsProgress: many seeds of a deterministic program that
// mixes every type; a lost wake-up shows as a hang (every thread parked).
func TestAuditDetSeedsProgress(t *testing.T) {
	for seed := range uint64(iters(300, 60)) {
		s, err := New(Options{Deterministic: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var m Mutex
		var rw RWMutex
		cond := NewCond(&m)
		sem := NewSemaphore(4)
		ch := NewChan[int](1)
		var wg WaitGroup
		var inside, rinside, winside int
		var errs []string
		fail := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
		ready := 0
		for p := range 7 {
			wg.Go(s, func(context.Context) error {
				for k := range 12 {
					switch (p + k) % 4 {
					case 0:
						m.Lock()
					case 1:
						for !m.TryLock() {
							Yield()
						}
					default:
						m.Lock()
					}
					inside++
					if inside != 1 {
						fail("mutex: %d inside", inside)
					}
					if k%3 == 0 {
						Yield()
					}
					inside--
					if k == 5 {
						ready++
						cond.Broadcast()
						for ready < 7 {
							cond.Wait()
						}
					}
					m.Unlock()
					if p%3 == 0 {
						rw.Lock()
						winside++
						if winside != 1 || rinside != 0 {
							fail("rw: %d writers, %d readers", winside, rinside)
						}
						Yield()
						winside--
						rw.Unlock()
					} else if rw.TryRLock() || func() bool { rw.RLock(); return true }() {
						rinside++
						if winside != 0 {
							fail("rw: reader beside a writer")
						}
						Yield()
						rinside--
						rw.RUnlock()
					}
					w := int64(1 + (p+k)%4)
					if sem.Acquire(context.Background(), w) == nil {
						Yield()
						sem.Release(w)
					}
					ch.Send(k) // then Recv: each thread's net is 0 or 1
					ch.Recv()
				}
				return nil
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("seed %d: hangs", seed)
		}
		s.Close()
		if len(errs) > 0 {
			t.Fatalf("seed %d: %v", seed, errs)
		}
	}
}

// TestAuditDetSeedsConservation: on many seeds of a deterministic
// scheduler, timed and cancelled sends and receives (contexts cancelled by
// other virtual threads, so at the same virtual instant as hand-offs)
// never lose or duplicate a value.
func TestAuditDetSeedsConservation(t *testing.T) {
	for seed := range uint64(iters(200, 40)) {
		s, err := New(Options{Deterministic: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		chans := []*Chan[int]{NewChan[int](0), NewChan[int](1), NewChan[int](0)}
		const producers, per = 4, 40
		sent := make([]int, producers*per)
		got := make([]int, producers*per)
		var wg WaitGroup
		var pending WaitGroup
		ctxs := make(chan context.CancelFunc, 1000)
		pending.Add(producers)
		for p := range producers {
			wg.Go(s, func(context.Context) error {
				defer pending.Done()
				for k := range per {
					v := p*per + k
					c := chans[(p+k)%3]
					ok := false
					switch k % 4 {
					case 0:
						ok = c.SendTimeout(v, time.Duration(k%3)*time.Microsecond+1)
					case 1:
						ctx, cancel := context.WithCancel(context.Background())
						ctxs <- cancel
						ok = c.SendContext(ctx, v) == nil
					case 2:
						ctx, cancel := context.WithCancel(context.Background())
						ctxs <- cancel
						i, _, _ := SelectContext(ctx, SendCase(c, v), SendCase(chans[(p+k+1)%3], v))
						ok = i >= 0
					case 3:
						i, _ := SelectTimeout(time.Microsecond, SendCase(c, v))
						ok = i >= 0
					}
					if ok {
						sent[v]++
					}
				}
				return nil
			})
		}
		// The canceller ends the contexts at various points, until the
		// producers are done and no context is left (deterministic mode:
		// nothing runs between a consumer's look at pending and its
		// queueing of a context).
		wg.Go(s, func(context.Context) error {
			for !pendingZero(&pending) || len(ctxs) > 0 {
				select {
				case cancel := <-ctxs:
					Yield()
					cancel()
				default:
					Yield()
				}
			}
			return nil
		})
		for c := range 3 {
			wg.Go(s, func(context.Context) error {
				var vs [3]int
				for k := 0; ; k++ {
					var v int
					okv := false
					switch k % 3 {
					case 0:
						x, ok, ready := chans[(c+k)%3].RecvTimeout(time.Duration(1+k%4) * time.Microsecond)
						v, okv = x, ok && ready
					case 1:
						if pendingZero(&pending) {
							break // the canceller may have gone
						}
						ctx, cancel := context.WithCancel(context.Background())
						ctxs <- cancel
						x, ok, err := chans[(c+k)%3].RecvContext(ctx)
						v, okv = x, ok && err == nil
					case 2:
						i, ok := SelectTimeout(2*time.Microsecond, RecvCase(chans[0], &vs[0]), RecvCase(chans[1], &vs[1]), RecvCase(chans[2], &vs[2]))
						if i >= 0 {
							v, okv = vs[i], ok
						}
					}
					if okv {
						got[v]++
					} else if pendingZero(&pending) {
						// Drain what is left, then stop.
						for _, ch := range chans {
							for {
								x, ok, ready := ch.TryRecv()
								if !ready || !ok {
									break
								}
								got[x]++
							}
						}
						return nil
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("seed %d: hangs", seed)
		}
		s.Close()
		for v := range sent {
			if sent[v] != got[v] {
				t.Fatalf("seed %d: value %d sent %d times, received %d", seed, v, sent[v], got[v])
			}
		}
	}
}

func pendingZero(wg *WaitGroup) bool {
	wg.mu.Lock()
	defer wg.mu.Unlock()
	return wg.n == 0
}

// TestAuditLockHandOffAcross: locks taken in one party and unlocked in
// another (a virtual thread locks, a goroutine unlocks, and the other way
// round), with TryLock and TryRLock beside, keep exclusion and progress.
func TestAuditLockHandOffAcross(t *testing.T) {
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

// TestAuditMisuseMessages: misuse that Go catches panics here with a
// message that names it, from a goroutine and from a virtual thread.
func TestAuditMisuseMessages(t *testing.T) {
	s := newSched(t, Options{})
	check := func(where string) {
		for name, f := range map[string]func(){
			"Mutex.Unlock":      func() { var m Mutex; m.Unlock() },
			"RWMutex.Unlock":    func() { var rw RWMutex; rw.Unlock() },
			"RWMutex.RUnlock":   func() { var rw RWMutex; rw.RUnlock() },
			"RWMutex.RUnlock/W": func() { var rw RWMutex; rw.Lock(); rw.RUnlock() },
			"RWMutex.Unlock/R":  func() { var rw RWMutex; rw.RLock(); rw.Unlock() },
			"WaitGroup.Add":     func() { var wg WaitGroup; wg.Add(1); wg.Add(-2) },
			"Cond.Wait/Mutex":   func() { NewCond(&Mutex{}).Wait() },
			"Cond.Wait/RW":      func() { NewCond(&RWMutex{}).Wait() },
			"Cond.Wait/RLocker": func() { var rw RWMutex; NewCond(rw.RLocker()).Wait() },
			"Semaphore.Release": func() { NewSemaphore(2).Release(1) },
			"Chan.Close":        func() { c := NewChan[int](0); c.Close(); c.Close() },
			"Chan.Send":         func() { c := NewChan[int](1); c.Close(); c.Send(1) },
			"Chan.TrySend":      func() { c := NewChan[int](1); c.Close(); c.TrySend(1) },
			"SendCase":          func() { c := NewChan[int](1); c.Close(); TrySelect(SendCase(c, 1)) },
		} {
			msg := mustPanic(t, f)
			if !strings.HasPrefix(msg, "scheduler") {
				t.Errorf("%s: %s: %q", where, name, msg)
			}
		}
	}
	check("goroutine")
	vt, _ := s.Go(func(context.Context) error { check("vthread"); return nil })
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}
