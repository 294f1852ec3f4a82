package scheduler

// Stress tests of the scheduler's synchronisation under concurrency, from
// virtual threads and goroutines together.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func joinAll(t *testing.T, vts []*VThread) {
	t.Helper()
	for _, vt := range vts {
		if !doneWithin(vt, 20*time.Second) {
			t.Fatalf("%v hung", vt)
		}
		if err := vt.Join(); err != nil {
			t.Fatalf("%v: %v", vt, err)
		}
	}
}

// Park/Unpark storm with spurious unparks from goroutines, spawning from
// vthreads (record reuse) and vthreads that Goexit.
func TestStressParkUnparkReuse(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	const N = 64
	var vts [N]*VThread
	var ready sync.WaitGroup
	ready.Add(N)
	var tokens [N]atomic.Int64
	var consumed [N]int64
	var stop atomic.Bool
	for i := range N {
		vts[i] = goOrFatal(t, s, func(ctx context.Context) error {
			ready.Done()
			for !stop.Load() || tokens[i].Load() > consumed[i] {
				if tokens[i].Load() > consumed[i] {
					consumed[i]++
					// spawn a short child, sometimes one that Goexits
					goexit := rand.IntN(8) == 0
					k, err := s.Go(func(ctx context.Context) error {
						if goexit {
							runtime.Goexit()
						}
						Yield()
						return nil
					})
					if err != nil {
						return err
					}
					switch {
					case rand.IntN(2) == 0:
					case goexit:
						// Join may run k inside this thread, which
						// k's Goexit would end too; Wait never does.
						if e := k.Wait(context.Background()); e != ErrGoexit {
							return fmt.Errorf("Wait = %v, want ErrGoexit", e)
						}
					default:
						if e := k.Join(); e != nil {
							return e
						}
					}
					continue
				}
				Park()
			}
			return nil
		})
	}
	ready.Wait()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20000 {
				i := r.IntN(N)
				if r.IntN(3) == 0 {
					tokens[i].Add(1)
				}
				vts[i].Unpark()
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	for i := range N {
		vts[i].Unpark()
	}
	joinAll(t, vts[:])
	for i := range N {
		if consumed[i] != tokens[i].Load() {
			t.Fatalf("vt %d consumed %d of %d", i, consumed[i], tokens[i].Load())
		}
	}
}

func TestStressMutex(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	var m Mutex
	var in atomic.Int32
	counter := 0
	body := func(n int, long bool) {
		for j := range n {
			if j%7 == 0 && m.TryLock() {
			} else {
				m.Lock()
			}
			if in.Add(1) != 1 {
				panic("two holders")
			}
			counter++
			if long && j%50 == 0 {
				time.Sleep(2 * time.Millisecond) // push waiters into starvation mode
			} else if j%5 == 0 {
				Yield()
			}
			in.Add(-1)
			m.Unlock()
		}
	}
	var vts []*VThread
	for i := range 40 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error { body(500, i == 0); return nil }))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); body(500, false) }()
	}
	wg.Wait()
	joinAll(t, vts)
	if counter != 44*500 {
		t.Fatalf("counter %d", counter)
	}
	if st := m.state.Load(); st != 0 {
		t.Fatalf("mutex state %b after all unlocked", st)
	}
}

func TestStressRWMutex(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	var rw RWMutex
	var readers, writers atomic.Int32
	body := func(n int, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 2))
		for range n {
			if r.IntN(4) == 0 {
				rw.Lock()
				if writers.Add(1) != 1 || readers.Load() != 0 {
					panic("writer not exclusive")
				}
				Yield()
				writers.Add(-1)
				rw.Unlock()
			} else {
				rw.RLock()
				readers.Add(1)
				if writers.Load() != 0 {
					panic("reader with writer")
				}
				Yield()
				readers.Add(-1)
				rw.RUnlock()
			}
		}
	}
	var vts []*VThread
	for i := range 30 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error { body(400, uint64(i)); return nil }))
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); body(400, uint64(100+i)) }()
	}
	wg.Wait()
	joinAll(t, vts)
}

func TestStressSemaphore(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	const size = 10
	sem := NewSemaphore(size)
	var held atomic.Int64
	body := func(n int, seed uint64) error {
		r := rand.New(rand.NewPCG(seed, 3))
		for range n {
			k := int64(1 + r.IntN(size))
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
			err := sem.Acquire(ctx, k)
			cancel()
			if err != nil {
				continue
			}
			if h := held.Add(k); h > size {
				panic("over-granted")
			}
			if r.IntN(2) == 0 {
				Yield()
			}
			held.Add(-k)
			sem.Release(k)
		}
		return nil
	}
	var vts []*VThread
	for i := range 30 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error { return body(300, uint64(i)) }))
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); body(300, uint64(100+i)) }()
	}
	wg.Wait()
	joinAll(t, vts)
	sem.mu.Lock()
	defer sem.mu.Unlock()
	if sem.cur != 0 || sem.head != nil {
		t.Fatalf("semaphore cur=%d head=%v after all released", sem.cur, sem.head)
	}
}

// Values sent with SendTimeout/Select/plain Send are received exactly once;
// a send that reports failure is never received.
func TestStressChan(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	chs := []*Chan[int]{NewChan[int](0), NewChan[int](0), NewChan[int](2)}
	const P, per = 8, 2000
	var sentOK [P * per]atomic.Bool
	var recvd [P * per]atomic.Int32
	var prodDone atomic.Int32
	producer := func(p int) {
		r := rand.New(rand.NewPCG(uint64(p), 4))
		for j := range per {
			v := p*per + j
			ok := false
			switch r.IntN(4) {
			case 0:
				chs[r.IntN(3)].Send(v)
				ok = true
			case 1:
				ok = chs[r.IntN(3)].SendTimeout(v, time.Duration(r.IntN(50))*time.Microsecond)
			case 2:
				i, _ := SelectTimeout(time.Duration(r.IntN(50))*time.Microsecond,
					SendCase(chs[0], v), SendCase(chs[1], v), SendCase(chs[2], v))
				ok = i >= 0
			case 3:
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(50))*time.Microsecond)
				ok = chs[r.IntN(3)].SendContext(ctx, v) == nil
				cancel()
			}
			sentOK[v].Store(ok)
		}
		prodDone.Add(1)
	}
	consumer := func(c int) {
		r := rand.New(rand.NewPCG(uint64(c), 5))
		for {
			var v0, v1, v2 int
			var got int
			var ok bool
			switch r.IntN(3) {
			case 0:
				i, _ := SelectTimeout(time.Millisecond, RecvCase(chs[0], &v0), RecvCase(chs[1], &v1), RecvCase(chs[2], &v2))
				if i < 0 {
					if prodDone.Load() == P {
						return
					}
					continue
				}
				got = []int{v0, v1, v2}[i]
				ok = true
			case 1:
				var ready bool
				got, _, ready = chs[r.IntN(3)].RecvTimeout(time.Duration(r.IntN(100)) * time.Microsecond)
				ok = ready
			case 2:
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(100))*time.Microsecond)
				var err error
				got, _, err = chs[r.IntN(3)].RecvContext(ctx)
				cancel()
				ok = err == nil
			}
			if ok {
				recvd[got].Add(1)
			} else if prodDone.Load() == P {
				// drain
				for _, c := range chs {
					for {
						v, _, ready := c.TryRecv()
						if !ready {
							break
						}
						recvd[v].Add(1)
					}
				}
				return
			}
		}
	}
	var vts []*VThread
	for p := range P - 2 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error { producer(p); return nil }))
	}
	var wg sync.WaitGroup
	for p := P - 2; p < P; p++ {
		wg.Add(1)
		go func() { defer wg.Done(); producer(p) }()
	}
	for c := range 6 {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error { consumer(c); return nil }))
	}
	wg.Add(1)
	go func() { defer wg.Done(); consumer(99) }()
	wg.Wait()
	joinAll(t, vts)
	for _, c := range chs {
		for {
			v, _, ready := c.TryRecv()
			if !ready {
				break
			}
			recvd[v].Add(1)
		}
	}
	bad := 0
	for v := range P * per {
		want := int32(0)
		if sentOK[v].Load() {
			want = 1
		}
		if recvd[v].Load() != want {
			bad++
			if bad < 5 {
				t.Errorf("value %d: sent ok=%v, received %d times", v, sentOK[v].Load(), recvd[v].Load())
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d values lost or duplicated", bad)
	}
}

// Close racing blocked senders/receivers/selects: every blocked sender
// panics or succeeds; every receiver gets a value or ok=false.
func TestStressChanClose(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	for round := range 300 {
		ch := NewChan[int](round % 3)
		other := NewChan[int](0)
		var sent, recvd, panicked atomic.Int64
		var vts []*VThread
		for i := range 6 {
			vts = append(vts, goOrFatal(t, s, func(ctx context.Context) (err error) {
				defer func() {
					if r := recover(); r != nil {
						panicked.Add(1)
					}
				}()
				if i%2 == 0 {
					ch.Send(i)
				} else {
					Select(SendCase(ch, i), RecvCase(other, nil))
				}
				sent.Add(1)
				return nil
			}))
		}
		for i := range 6 {
			vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
				for {
					var ok bool
					if i%2 == 0 {
						_, ok = ch.Recv()
					} else {
						_, ok = Select(RecvCase(ch, nil))
					}
					if !ok {
						return nil
					}
					recvd.Add(1)
				}
			}))
		}
		Sleep(0)
		time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
		ch.Close()
		joinAll(t, vts)
		if sent.Load() != recvd.Load() || sent.Load()+panicked.Load() != 6 {
			t.Fatalf("round %d: sent %d recvd %d panicked %d", round, sent.Load(), recvd.Load(), panicked.Load())
		}
	}
}

func TestStressGroupCancel(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	for round := range 300 {
		g, gctx := s.NewGroup(context.Background())
		ch := NewChan[int](0)
		for i := range 8 {
			g.Go(func(ctx context.Context) error {
				if i == round%8 {
					Yield()
					return context.DeadlineExceeded
				}
				_, _, err := ch.RecvContext(gctx)
				if err == nil {
					panic("nothing sends")
				}
				if i%2 == 0 {
					return g.Go(func(ctx context.Context) error { return ctx.Err() })
				}
				return nil
			})
		}
		done := make(chan error, 1)
		go func() { done <- g.Wait() }()
		select {
		case err := <-done:
			if err != context.DeadlineExceeded {
				t.Fatalf("round %d: Wait = %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Group.Wait hung", round)
		}
	}
}
