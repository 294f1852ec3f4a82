package scheduler

// Stress tests of the carrier loop and Park/Unpark under chaos: the
// carriers' idle path is delayed at random (testHooks), wake-ups come
// from everywhere at once, and a watchdog dumps every goroutine if
// progress stops.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// watchdog fails the test with every goroutine's stack if progress does
// not move for 10 s.
func chaosWatchdog(t *testing.T, progress *atomic.Int64, extra func() string) (stop func()) {
	done := make(chan struct{})
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		last := progress.Load()
		since := time.Now()
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if p := progress.Load(); p != last {
				last, since = p, time.Now()
				continue
			}
			if time.Since(since) > 10*time.Second {
				fmt.Fprintf(os.Stderr, "=== WATCHDOG %s: no progress for 10s at %d\n", t.Name(), last)
				if extra != nil {
					fmt.Fprintln(os.Stderr, extra())
				}
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
				os.Exit(3)
			}
		}
	}()
	return func() { close(done); <-fin }
}

// chaosHooks installs sleep hooks that randomly Gosched or sleep.
func chaosHooks(t *testing.T) {
	f := func(*carrier) {
		switch rand.IntN(8) {
		case 0:
			time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
		case 1, 2:
			runtime.Gosched()
		}
	}
	testHooks.sleepBeforeIdle.Store(&f)
	testHooks.sleepBeforeLook.Store(&f)
	t.Cleanup(func() {
		testHooks.sleepBeforeIdle.Store(nil)
		testHooks.sleepBeforeLook.Store(nil)
	})
}

func chaosOpts() []struct {
	name string
	o    Options
} {
	f := false
	return []struct {
		name string
		o    Options
	}{
		{"c1", Options{Carriers: 1}},
		{"c2", Options{Carriers: 2}},
		{"c3", Options{Carriers: 3}},
		{"c2-unlocked", Options{Carriers: 2, LockOSThread: &f}},
		{"c4-nocomp", Options{Carriers: 4, MaxCompensation: -1}},
	}
}

// Token passing: each worker waits for tokens with a Park loop; tokens
// come from plain goroutines, timers, virtual threads of the same and of
// another scheduler, sometimes with pinned parks and yields.
func TestChaosParkUnparkTokens(t *testing.T) {
	for _, oc := range chaosOpts() {
		t.Run(oc.name, func(t *testing.T) {
			chaosHooks(t)
			s := newTest(t, oc.o)
			other := newTest(t, Options{Carriers: 1})
			const N = 24
			perWorker := int64(300)
			if testing.Short() {
				perWorker = 50
			}
			var progress atomic.Int64
			var tokens [N]atomic.Int64
			var consumed [N]atomic.Int64
			var inside [N]atomic.Int32
			var ws [N]atomic.Pointer[VThread]
			var failed atomic.Value
			stopWD := chaosWatchdog(t, &progress, func() string {
				var b []byte
				for i := range N {
					vt := ws[i].Load()
					st := int32(-1)
					if vt != nil {
						st = vt.state.Load()
						b = fmt.Appendf(b, "w%d state=%d permit=%v tokens=%d\n", i, st, vt.permit.Load(), tokens[i].Load())
					}
				}
				s.mu.Lock()
				b = fmt.Appendf(b, "nidle=%d idle=%d global=%d temp=%d blocked=%d\n", s.nidle.Load(), len(s.idle), s.nglobal.Load(), s.temp, s.blocked.Load())
				s.mu.Unlock()
				for _, c := range s.carriers {
					c.mu.Lock()
					b = fmt.Appendf(b, "carrier %d queue=%d queued=%#x owed=%d\n", c.id, len(c.queue)-c.head, c.queued.Load(), c.owed.Load())
					c.mu.Unlock()
				}
				return string(b)
			})
			defer stopWD()
			var workers []*VThread
			for i := range N {
				vt := goOrFatal(t, s, func(ctx context.Context) error {
					ws[i].Store(Current())
					got := int64(0)
					for got < perWorker {
						for tokens[i].Load() <= got {
							switch rand.IntN(20) {
							case 0:
								pinning.Do(func() { Park() })
							default:
								Park()
							}
							if inside[i].Add(1) != 1 {
								failed.Store(fmt.Errorf("worker %d resumed twice at once", i))
							}
							inside[i].Add(-1)
						}
						got++
						consumed[i].Store(got)
						progress.Add(1)
						if rand.IntN(10) == 0 {
							Yield()
						}
					}
					return nil
				})
				workers = append(workers, vt)
			}
			for ws := range N {
				_ = ws
			}
			give := func(i int) {
				if vt := ws[i].Load(); vt != nil {
					vt.Unpark()
				}
			}
			// producers
			var wg sync.WaitGroup
			var sent atomic.Int64
			total := int64(N * perWorker)
			// next hands a token to a worker that has used all its own
			// (so that every token is waited for), or reports false when
			// all are handed out.
			next := func() (int, bool) {
				for {
					if sent.Load() >= total {
						return 0, false
					}
					i := rand.IntN(N)
					c := consumed[i].Load()
					if c < perWorker && tokens[i].Load() == c && tokens[i].CompareAndSwap(c, c+1) {
						sent.Add(1)
						return i, true
					}
					Yield() // runtime.Gosched outside a virtual thread
				}
			}
			// wait until every worker published itself
			for p := range 4 {
				wg.Add(1)
				switch p {
				case 0: // plain goroutine
					go func() {
						defer wg.Done()
						for {
							i, ok := next()
							if !ok {
								return
							}
							give(i)
							if rand.IntN(4) == 0 {
								runtime.Gosched()
							}
						}
					}()
				case 1: // timers
					go func() {
						defer wg.Done()
						var twg sync.WaitGroup
						for {
							i, ok := next()
							if !ok {
								break
							}
							twg.Add(1)
							time.AfterFunc(time.Duration(rand.IntN(200))*time.Microsecond, func() { give(i); twg.Done() })
							if rand.IntN(8) == 0 {
								time.Sleep(50 * time.Microsecond)
							}
						}
						twg.Wait()
					}()
				case 2: // same scheduler vthread
					go func() {
						defer wg.Done()
						vt := goOrFatal(t, s, func(ctx context.Context) error {
							for {
								i, ok := next()
								if !ok {
									return nil
								}
								give(i)
								if rand.IntN(16) == 0 {
									Yield()
								}
							}
						})
						vt.Join()
					}()
				case 3: // another scheduler
					go func() {
						defer wg.Done()
						vt := goOrFatal(t, other, func(ctx context.Context) error {
							for {
								i, ok := next()
								if !ok {
									return nil
								}
								give(i)
								if rand.IntN(16) == 0 {
									Yield()
								}
							}
						})
						vt.Join()
					}()
				}
			}
			// spurious unparks
			stopSp := make(chan struct{})
			var spwg sync.WaitGroup
			spwg.Add(1)
			go func() {
				defer spwg.Done()
				for {
					select {
					case <-stopSp:
						return
					default:
					}
					if vt := ws[rand.IntN(N)].Load(); vt != nil {
						vt.Unpark()
					}
					time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
				}
			}()
			wg.Wait()
			for _, vt := range workers {
				if err := vt.Join(); err != nil {
					t.Fatal(err)
				}
			}
			close(stopSp)
			spwg.Wait()
			if e := failed.Load(); e != nil {
				t.Fatal(e)
			}
			if p := progress.Load(); p != total {
				t.Fatalf("progress %d != %d", p, total)
			}
			t.Logf("progress %d at %v", progress.Load(), time.Now().Format("15:04:05.000000"))
			// temps retire? blocked back to 0
			if n := s.blocked.Load(); n != 0 {
				t.Errorf("blocked = %d", n)
			}
		})
	}
}

// Spawn/join trees with nested joins, parks inside children, pinned
// parks, Goexit in children (joined by Wait), yields and sleeps.
func TestChaosSpawnJoinChaos(t *testing.T) {
	for _, oc := range chaosOpts() {
		t.Run(oc.name, func(t *testing.T) {
			chaosHooks(t)
			s := newTest(t, oc.o)
			var progress atomic.Int64
			stopWD := chaosWatchdog(t, &progress, nil)
			defer stopWD()
			var tree func(depth int) func(context.Context) error
			tree = func(depth int) func(context.Context) error {
				return func(ctx context.Context) error {
					progress.Add(1)
					if depth == 0 {
						switch rand.IntN(12) {
						case 0:
							Yield()
						case 1:
							Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
						case 2:
							me := Current()
							go func() { runtime.Gosched(); me.Unpark() }()
							Park()
						case 3:
							me := Current()
							go func() { time.Sleep(20 * time.Microsecond); me.Unpark() }()
							pinning.Do(func() { Park() })
						case 4:
							runtime.Goexit()
						}
						return nil
					}
					n := 1 + rand.IntN(4)
					kids := make([]*VThread, 0, n)
					goexits := make([]bool, 0, n)
					for range n {
						gx := depth == 1 && rand.IntN(16) == 0
						f := tree(depth - 1)
						if gx {
							f = func(context.Context) error { runtime.Goexit(); return nil }
						}
						k, err := s.Go(f)
						if err != nil {
							return err
						}
						kids = append(kids, k)
						goexits = append(goexits, gx)
					}
					for i := len(kids) - 1; i >= 0; i-- {
						k := kids[i]
						var err error
						if goexits[i] || depth == 1 {
							// a leaf may Goexit: Wait, never nested
							err = k.Wait(context.Background())
						} else if rand.IntN(2) == 0 {
							err = k.Join()
						} else {
							err = k.Wait(context.Background())
						}
						if err != nil && !errors.Is(err, ErrGoexit) {
							return err
						}
					}
					return nil
				}
			}
			var roots []*VThread
			for range 8 {
				roots = append(roots, goOrFatal(t, s, tree(5)))
			}
			for _, r := range roots {
				if err := r.Join(); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("tree progress %d", progress.Load())
			deadline := time.Now().Add(5 * time.Second)
			for s.Live() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := s.Live(); n != 0 {
				t.Fatalf("Live = %d after all roots joined", n)
			}
		})
	}
}

// Shutdown racing with starts from outside and from virtual threads:
// when it returns nil every started thread is done, and the scheduler's
// goroutines are gone.
func TestChaosShutdownRaces(t *testing.T) {
	for _, oc := range chaosOpts() {
		t.Run(oc.name, func(t *testing.T) {
			chaosHooks(t)
			base := runtime.NumGoroutine()
			for round := range 30 {
				s, err := New(oc.o)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var all []*VThread
				add := func(vt *VThread) {
					mu.Lock()
					all = append(all, vt)
					mu.Unlock()
				}
				var spawn func(int) func(context.Context) error
				spawn = func(d int) func(context.Context) error {
					return func(ctx context.Context) error {
						if rand.IntN(3) == 0 {
							Yield()
						}
						if rand.IntN(5) == 0 {
							Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
						}
						if d > 0 {
							for range 2 {
								if k, err := s.Go(spawn(d - 1)); err == nil {
									add(k)
								}
							}
						}
						return nil
					}
				}
				var wg sync.WaitGroup
				for range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 50 {
							if vt, err := s.Go(spawn(3)); err == nil {
								add(vt)
							} else {
								return
							}
						}
					}()
				}
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = s.Shutdown(ctx)
				cancel()
				if err != nil {
					t.Fatalf("round %d: Shutdown: %v", round, err)
				}
				mu.Lock()
				for _, vt := range all {
					if !vt.finished() {
						t.Fatalf("round %d: Shutdown returned with %v state %d", round, vt, vt.state.Load())
					}
				}
				mu.Unlock()
				wg.Wait()
				mu.Lock()
				for _, vt := range all {
					if !vt.finished() {
						t.Fatalf("round %d: started after Shutdown: %v state %d", round, vt, vt.state.Load())
					}
				}
				mu.Unlock()
			}
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > base {
				buf := make([]byte, 1<<20)
				t.Fatalf("goroutines: %d > %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// Compensation carriers: many pinned parks across carriers, unparked from
// goroutines. s.temp never exceeds MaxCompensation, and once nothing is
// blocked and the threads are done the compensation carriers retire.
func TestChaosCompensation(t *testing.T) {
	for _, maxc := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(maxc), func(t *testing.T) {
			chaosHooks(t)
			s := newTest(t, Options{Carriers: 2, MaxCompensation: maxc})
			var maxTemp atomic.Int64
			var progress atomic.Int64
			stopWD := chaosWatchdog(t, &progress, nil)
			defer stopWD()
			var vts []*VThread
			for range 16 {
				vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
					me := Current()
					for range 100 {
						go func() {
							time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
							me.Unpark()
						}()
						if rand.IntN(2) == 0 {
							pinning.Do(func() { Park() })
						} else {
							Park()
						}
						s.mu.Lock()
						tmp := s.temp
						s.mu.Unlock()
						for {
							m := maxTemp.Load()
							if int64(tmp) <= m || maxTemp.CompareAndSwap(m, int64(tmp)) {
								break
							}
						}
						progress.Add(1)
					}
					return nil
				}))
			}
			for _, vt := range vts {
				if err := vt.Join(); err != nil {
					t.Fatal(err)
				}
			}
			if m := maxTemp.Load(); m > int64(maxc) {
				t.Errorf("temp reached %d > MaxCompensation %d", m, maxc)
			}
			time.Sleep(50 * time.Millisecond)
			s.mu.Lock()
			tmp, b := s.temp, s.blocked.Load()
			s.mu.Unlock()
			t.Logf("after: temp=%d blocked=%d maxTemp=%d", tmp, b, maxTemp.Load())
		})
	}
}
