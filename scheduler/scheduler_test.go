package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/pinning"
)

// End-to-end tests of the scheduler's claims at scale and at their edges:
// a million virtual threads, a hundred thousand parked at once, carriers
// blocked by pinned virtual threads, reproducible interleavings, panics
// and Goexit, no lost wake-ups, shutdown, CPU binding. Each one can fail:
// a wrong sum, a wake-up that never comes (every wait is bounded), a
// trace that differs, a goroutine left behind.

// waitTimeout bounds every wait in these tests: a lost wake-up or a
// deadlock fails the test instead of hanging it.
const waitTimeout = 20 * time.Second

func isPortable() bool { return weft.ActiveBackend() != weft.StackCopying }

// boundedSched is newTest whose cleanup cannot hang: a test that failed with
// virtual threads still parked leaves them, and says so, instead of
// blocking the test binary in Shutdown for ever.
func boundedSched(t *testing.T, opts Options) *Scheduler {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownWithin(t, s, 10*time.Second) })
	return s
}

// shutdownWithin shuts s down, draining for at most d, and fails the test
// if that fails or if the virtual threads do not finish even once their
// contexts are cancelled.
func shutdownWithin(t *testing.T, s *Scheduler, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v (%d virtual threads were still live)", err, s.Live())
		}
	case <-time.After(2 * d):
		t.Errorf("Shutdown hung with %d virtual threads live; leaving them", s.Live())
	}
}

// waitUntil polls cond until it holds, failing the test after waitTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// joinWithin joins vt, failing the test if it has not finished within
// waitTimeout.
func joinWithin(t *testing.T, vt *VThread) error {
	t.Helper()
	select {
	case <-vt.Done():
		return vt.Join()
	case <-time.After(waitTimeout):
		t.Fatalf("%v did not finish within %v", vt, waitTimeout)
		return nil
	}
}

// goOrFatal starts fn, failing the test if the scheduler refuses.
func goOrFatal(t *testing.T, s *Scheduler, fn func(ctx context.Context) error) *VThread {
	t.Helper()
	vt, err := s.Go(fn)
	if err != nil {
		t.Fatalf("Go: %v", err)
	}
	return vt
}

// memSampler samples runtime.MemStats while a test runs and keeps the
// peaks. ReadMemStats stops the world, so it samples every few
// milliseconds only.
type memSampler struct {
	s          *Scheduler
	base       runtime.MemStats
	stop, done chan struct{}
	peakInuse  uint64 // HeapInuse + StackInuse
	peakSys    uint64
	peakLive   int // s.Live()
}

func startMemSampler(s *Scheduler) *memSampler {
	m := &memSampler{s: s, stop: make(chan struct{}), done: make(chan struct{})}
	runtime.GC()
	runtime.ReadMemStats(&m.base)
	go func() {
		defer close(m.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			m.sample()
			select {
			case <-m.stop:
				m.sample()
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memSampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.peakInuse = max(m.peakInuse, ms.HeapInuse+ms.StackInuse)
	m.peakSys = max(m.peakSys, ms.Sys)
	m.peakLive = max(m.peakLive, m.s.Live())
}

// finish stops sampling and returns the peaks above the baseline.
func (m *memSampler) finish() (inuse, sys uint64) {
	close(m.stop)
	<-m.done
	base := m.base.HeapInuse + m.base.StackInuse
	return m.peakInuse - min(base, m.peakInuse), m.peakSys - min(m.base.Sys, m.peakSys)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// checkedSkynet is skynet with every error checked: the sum of num ..
// num+size-1, computed by a 10-ary tree of virtual threads whose leaves
// return their number. It counts the virtual threads it starts.
func checkedSkynet(s *Scheduler, spawned *atomic.Int64, num, size int) (int64, error) {
	if size == 1 {
		return int64(num), nil
	}
	const div = 10
	var kids [div]*VThread
	var sums [div]int64
	for i := range div {
		sub := num + i*(size/div)
		vt, err := s.Go(func(ctx context.Context) error {
			v, err := checkedSkynet(s, spawned, sub, size/div)
			sums[i] = v
			return err
		})
		if err != nil {
			return 0, err
		}
		spawned.Add(1)
		kids[i] = vt
	}
	var sum int64
	var first error
	for i, k := range kids {
		if err := k.Join(); err != nil && first == nil {
			first = err
		}
		sum += sums[i] // written before the child finished: Join orders it
	}
	return sum, first
}

// TestSkynet runs the skynet benchmark's tree: a million leaves
// (1,111,110 virtual threads in all), 100,000 with -short, and checks the
// sum and the number of virtual threads started; and that the tree runs
// depth first, as the carriers' run queues mean it to (a parent woken by
// its last child runs next): a few hundred virtual threads live at once
// per carrier, not a level of the tree.
func TestSkynet(t *testing.T) {
	leaves := 1_000_000
	if testing.Short() || raceEnabled {
		leaves = 100_000
	}
	s := boundedSched(t, Options{})
	var spawned atomic.Int64
	var sum int64
	mem := startMemSampler(s)
	start := time.Now()
	root := goOrFatal(t, s, func(ctx context.Context) error {
		var err error
		sum, err = checkedSkynet(s, &spawned, 0, leaves)
		return err
	})
	if err := joinWithin(t, root); err != nil {
		t.Fatalf("skynet: %v", err)
	}
	elapsed := time.Since(start)
	inuse, sys := mem.finish()
	if want := int64(leaves) * int64(leaves-1) / 2; sum != want {
		t.Fatalf("skynet(%d) = %d, want %d", leaves, sum, want)
	}
	wantSpawned := int64(0)
	for n := leaves; n > 1; n /= 10 {
		wantSpawned += int64(n)
	}
	if got := spawned.Load(); got != wantSpawned {
		t.Fatalf("skynet started %d virtual threads, want %d", got, wantSpawned)
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })
	t.Logf("skynet: %d leaves, %d virtual threads, %d carriers, %s backend: %v (%.0f ns/vthread); peak HeapInuse+StackInuse +%.1f MiB, peak Sys +%.1f MiB, peak Live() %d (sampled)",
		leaves, wantSpawned+1, len(s.carriers), weft.ActiveBackend(), elapsed,
		float64(elapsed.Nanoseconds())/float64(wantSpawned+1), mib(inuse), mib(sys), mem.peakLive)
	if limit := max(1000, 200*len(s.carriers)); mem.peakLive > limit {
		t.Errorf("up to %d virtual threads live at once, want at most %d: the tree does not run depth first", mem.peakLive, limit)
	}
}

// TestManyParked parks 100,000 virtual threads at once (10,000 with
// -short), checks that they are all live and parked, then unparks and
// joins them all.
func TestManyParked(t *testing.T) {
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 10_000
	}
	s := boundedSched(t, Options{})
	var parked, woke atomic.Int64
	var release atomic.Bool
	vts := make([]*VThread, n)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for i := range vts {
		vts[i] = goOrFatal(t, s, func(ctx context.Context) error {
			parked.Add(1)
			for !release.Load() {
				Park()
			}
			woke.Add(1)
			return nil
		})
	}
	waitUntil(t, fmt.Sprintf("%d virtual threads to park", n), func() bool { return parked.Load() == int64(n) })
	spawned := time.Since(start)
	if got := s.Live(); got != n {
		t.Fatalf("Live() = %d with %d virtual threads parked, want %d", got, n, n)
	}
	// None may run on without an Unpark: a Park that returns spuriously
	// loops, and none has been told to stop.
	time.Sleep(10 * time.Millisecond)
	if w := woke.Load(); w != 0 {
		t.Fatalf("%d virtual threads went on before release", w)
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	grown := int64(m1.HeapInuse+m1.StackInuse) - int64(m0.HeapInuse+m0.StackInuse)

	release.Store(true)
	for _, vt := range vts {
		vt.Unpark()
	}
	for _, vt := range vts {
		if err := joinWithin(t, vt); err != nil {
			t.Fatalf("%v: %v", vt, err)
		}
	}
	if w := woke.Load(); w != int64(n) {
		t.Fatalf("%d virtual threads finished, want %d", w, n)
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })
	t.Logf("%d parked virtual threads (%s backend): started and parked in %v, all done after %v; about %d B each (HeapInuse+StackInuse)",
		n, weft.ActiveBackend(), spawned, time.Since(start), grown/int64(n))
}

// parkPinnedUntil parks the calling virtual thread inside a critical
// section until *release is set, so that every Park is pinned and blocks
// the carrier. Pins must name this function as the site.
//
//go:noinline
func parkPinnedUntil(release *atomic.Bool) {
	pinning.Do(func() {
		for !release.Load() {
			Park()
		}
	})
}

var parkPinnedSite = funcName(parkPinnedUntil)

// funcName returns the name of function f in the runtime's tables, as a
// pin site names it: from the function rather than a literal, so that a
// copy of the module under another path runs these tests too.
func funcName(f any) string { return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name() }

// criticalPins returns the CriticalSection rows of Pins.
func criticalPins(s *Scheduler) []PinEvent {
	var out []PinEvent
	for _, e := range s.Pins() {
		if e.Reason == pinning.CriticalSection {
			out = append(out, e)
		}
	}
	return out
}

func pinCount(s *Scheduler, site string) uint64 {
	for _, e := range s.Pins() {
		if e.Reason == pinning.CriticalSection && e.Function == site {
			return e.Count
		}
	}
	return 0
}

// TestPinnedCompensation blocks every carrier with a virtual thread
// parked inside pinning.Do and checks that a thousand others still run to
// completion meanwhile, on compensation carriers; then releases the pinned
// ones and checks what Pins reports.
func TestPinnedCompensation(t *testing.T) {
	for _, n := range []int{1, max(2, runtime.GOMAXPROCS(0))} {
		t.Run(fmt.Sprintf("carriers=%d", n), func(t *testing.T) {
			s := boundedSched(t, Options{Carriers: n})
			var release atomic.Bool
			pinned := make([]*VThread, n)
			for i := range pinned {
				pinned[i] = goOrFatal(t, s, func(ctx context.Context) error {
					parkPinnedUntil(&release)
					return nil
				})
			}
			// Every pinned Park is counted before it blocks its carrier.
			waitUntil(t, fmt.Sprintf("%d pinned parks", n), func() bool { return pinCount(s, parkPinnedSite) == uint64(n) })
			waitUntil(t, fmt.Sprintf("%d carriers blocked", n), func() bool { return s.blocked.Load() == int32(n) })

			// A thousand short virtual threads, half started from this
			// goroutine and half from a virtual thread (so through a
			// carrier's local queue), each yielding once.
			const short = 1000
			var ran, onTemp atomic.Int64
			body := func(ctx context.Context) error {
				if c := Current().carrier; c != nil && c.temp {
					onTemp.Add(1)
				}
				Yield()
				ran.Add(1)
				return nil
			}
			var kids []*VThread
			for range short / 2 {
				kids = append(kids, goOrFatal(t, s, body))
			}
			var inner []*VThread
			spawner := goOrFatal(t, s, func(ctx context.Context) error {
				for range short / 2 {
					vt, err := s.Go(body)
					if err != nil {
						return err
					}
					inner = append(inner, vt)
				}
				for _, vt := range inner {
					if err := vt.Join(); err != nil {
						return err
					}
				}
				return nil
			})
			for _, vt := range kids {
				if err := joinWithin(t, vt); err != nil {
					t.Fatal(err)
				}
			}
			if err := joinWithin(t, spawner); err != nil {
				t.Fatal(err)
			}
			if got := ran.Load(); got != short {
				t.Fatalf("%d short virtual threads ran, want %d", got, short)
			}
			for _, vt := range pinned {
				select {
				case <-vt.Done():
					t.Fatalf("%v finished before it was released", vt)
				default:
				}
			}
			if got := s.blocked.Load(); got != int32(n) {
				t.Fatalf("%d carriers blocked while the short ones ran, want %d", got, n)
			}
			if n == 1 && onTemp.Load() != short {
				// The only carrier is blocked: everything else must have
				// run on compensation carriers.
				t.Fatalf("%d of %d short virtual threads ran on compensation carriers, want all", onTemp.Load(), short)
			}

			release.Store(true)
			for _, vt := range pinned {
				vt.Unpark()
			}
			for _, vt := range pinned {
				if err := joinWithin(t, vt); err != nil {
					t.Fatal(err)
				}
			}
			crit := criticalPins(s)
			if len(crit) != 1 || crit[0].Function != parkPinnedSite || crit[0].Count != uint64(n) {
				t.Fatalf("Pins() CriticalSection rows = %+v, want one at %s counting %d", crit, parkPinnedSite, n)
			}
			t.Logf("carriers=%d: %d short virtual threads ran while %d carriers were blocked, %d of them on compensation carriers; Pins: %+v",
				n, short, n, onTemp.Load(), s.Pins())
		})
	}
}

// TestCompensationCarrierQueue: a virtual thread running on a
// compensation carrier starts another, then parks pinned, blocking that
// carrier. The one it started must still run (on another carrier), or the
// program deadlocks: here the new one is what releases both pinned ones.
func TestCompensationCarrierQueue(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1, MaxCompensation: 2})
	var releaseP, releaseX atomic.Bool
	p := goOrFatal(t, s, func(ctx context.Context) error {
		parkPinnedUntil(&releaseP)
		return nil
	})
	waitUntil(t, "the only carrier to block", func() bool { return s.blocked.Load() == 1 })
	// x can only run on the compensation carrier.
	var onTemp atomic.Bool
	x := goOrFatal(t, s, func(ctx context.Context) error {
		self := Current()
		onTemp.Store(self.carrier != nil && self.carrier.temp)
		if _, err := s.Go(func(ctx context.Context) error {
			releaseX.Store(true)
			self.Unpark()
			releaseP.Store(true)
			p.Unpark()
			return nil
		}); err != nil {
			return err
		}
		parkPinnedUntil(&releaseX)
		return nil
	})
	if err := joinWithin(t, x); err != nil {
		t.Fatal(err)
	}
	if err := joinWithin(t, p); err != nil {
		t.Fatal(err)
	}
	if !onTemp.Load() {
		t.Errorf("x did not run on a compensation carrier; the test did not test what it means to")
	}
	if got := pinCount(s, parkPinnedSite); got != 2 {
		t.Errorf("%d pinned parks counted, want 2", got)
	}
}

// detTrace runs a fixed program on a deterministic scheduler seeded with
// seed and returns its trace: five workers that each take twenty steps,
// sleeping 0 to 3 ms of virtual time (drawn from the worker's own
// generator, so the same for every seed) and sometimes yielding. Sleeps
// of equal length leave several workers runnable at once, which is where
// the scheduler's seed decides the order.
func detTrace(t *testing.T, seed uint64) []string {
	t.Helper()
	s, err := New(Options{Deterministic: true, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownWithin(t, s, 10*time.Second)
	var mu sync.Mutex
	var trace []string
	record := func(format string, args ...any) {
		mu.Lock()
		trace = append(trace, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	const workers, steps = 5, 20
	// The root starts the workers, so that no plain goroutine races the
	// carrier while they are queued.
	root := goOrFatal(t, s, func(ctx context.Context) error {
		var vts []*VThread
		for w := range workers {
			vt, err := s.GoNamed(fmt.Sprintf("w%d", w), func(ctx context.Context) error {
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for step := range steps {
					Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
					record("w%d s%d t=%v", w, step, s.Now().Sub(epoch))
					if rng.IntN(2) == 0 {
						Yield()
						record("w%d y%d t=%v", w, step, s.Now().Sub(epoch))
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			vts = append(vts, vt)
		}
		for _, vt := range vts {
			if err := vt.Join(); err != nil {
				return err
			}
		}
		return nil
	})
	if err := joinWithin(t, root); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(trace)
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("event %d: %q vs %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
}

// TestDeterministicReplay: the same seed gives the same trace, event
// for event and virtual time for virtual time; other seeds give other
// interleavings of the same events.
func TestDeterministicReplay(t *testing.T) {
	a := detTrace(t, 1)
	if len(a) == 0 {
		t.Fatal("empty trace")
	}
	for range 3 {
		if b := detTrace(t, 1); !slices.Equal(a, b) {
			t.Fatalf("seed 1 twice gave different traces: %s", firstDiff(a, b))
		}
	}
	sortedA := slices.Sorted(slices.Values(a))
	distinct := map[string]bool{strings.Join(a, "\n"): true}
	for seed := uint64(2); seed <= 8; seed++ {
		b := detTrace(t, seed)
		// The same program: the same events at the same virtual times...
		if sb := slices.Sorted(slices.Values(b)); !slices.Equal(sortedA, sb) {
			t.Fatalf("seed %d ran other events than seed 1: %s", seed, firstDiff(sortedA, sb))
		}
		distinct[strings.Join(b, "\n")] = true
		if seed == 2 && slices.Equal(a, b) {
			// ...interleaved otherwise.
			t.Fatalf("seeds 1 and 2 gave the same interleaving of %d events", len(a))
		}
	}
	if len(distinct) < 4 {
		t.Fatalf("8 seeds gave only %d distinct interleavings", len(distinct))
	}
	t.Logf("%d events; 8 seeds gave %d distinct interleavings", len(a), len(distinct))
}

// TestDeterministicVirtualTime: Sleep(1h) takes no wall time and
// moves the virtual clock by exactly an hour; AfterFunc fires at its
// virtual time on the way.
func TestDeterministicVirtualTime(t *testing.T) {
	s := boundedSched(t, Options{Deterministic: true, Seed: 3})
	before := s.Now()
	var slept, wall, timerAt time.Duration
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		t0, w0 := s.Now(), time.Now()
		s.AfterFunc(30*time.Minute, func() { timerAt = s.Now().Sub(t0) })
		Sleep(time.Hour)
		slept, wall = s.Now().Sub(t0), time.Since(w0)
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if slept != time.Hour {
		t.Errorf("Sleep(1h) moved the virtual clock by %v, want exactly 1h", slept)
	}
	if wall > 2*time.Second {
		t.Errorf("Sleep(1h) took %v of wall time, want about none", wall)
	}
	if timerAt != 30*time.Minute {
		t.Errorf("AfterFunc(30m) fired at %v of virtual time, want 30m", timerAt)
	}
	if d := s.Now().Sub(before); d != time.Hour {
		t.Errorf("s.Now() moved by %v, want 1h", d)
	}
	t.Logf("Sleep(1h): %v of wall time", wall)
}

// valuePanicker panics with v; panic stacks must name it.
//
//go:noinline
func valuePanicker(v any) {
	panic(v)
}

var errTestPanic = errors.New("proof panic")

// TestPanics: a hundred panicking virtual threads on one carrier each
// surface from Join as a *PanicError with their value and a stack naming
// the panicking function, each reaches OnPanic once, and the carrier goes
// on running virtual threads afterwards.
func TestPanics(t *testing.T) {
	var mu sync.Mutex
	handled := map[*VThread]any{}
	s := boundedSched(t, Options{Carriers: 1, OnPanic: func(vt *VThread, v any) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := handled[vt]; dup {
			t.Errorf("OnPanic called twice for %v", vt)
		}
		handled[vt] = v
	}})
	const n = 100
	vts := make([]*VThread, n)
	for i := range vts {
		vts[i] = goOrFatal(t, s, func(ctx context.Context) error {
			if i%10 == 0 {
				valuePanicker(fmt.Errorf("%d: %w", i, errTestPanic))
			}
			valuePanicker(i)
			return nil
		})
	}
	for i, vt := range vts {
		err := joinWithin(t, vt)
		var pe *PanicError
		if !errors.As(err, &pe) {
			t.Fatalf("Join of panicking vthread %d = %v, want a *PanicError", i, err)
		}
		if i%10 == 0 {
			if !errors.Is(err, errTestPanic) {
				t.Errorf("vthread %d: Join = %v, does not unwrap to the error it panicked with", i, err)
			}
		} else if pe.Value != i {
			t.Errorf("vthread %d: PanicError.Value = %v, want %d", i, pe.Value, i)
		}
		if !strings.Contains(string(pe.Stack), "scheduler.valuePanicker") {
			t.Errorf("vthread %d: the panic's stack does not name valuePanicker:\n%s", i, pe.Stack)
		}
		mu.Lock()
		v, ok := handled[vt]
		mu.Unlock()
		if !ok || v != pe.Value {
			t.Errorf("vthread %d: OnPanic saw %v (called: %v), want %v, before Join returned", i, v, ok, pe.Value)
		}
	}
	mu.Lock()
	if len(handled) != n {
		t.Errorf("OnPanic called for %d virtual threads, want %d", len(handled), n)
	}
	mu.Unlock()
	// The carrier survived all of them.
	var ran atomic.Int64
	for range n {
		vt := goOrFatal(t, s, func(ctx context.Context) error { Yield(); ran.Add(1); return nil })
		if err := joinWithin(t, vt); err != nil {
			t.Fatal(err)
		}
	}
	if ran.Load() != n {
		t.Fatalf("%d virtual threads ran after the panics, want %d", ran.Load(), n)
	}
}

// TestGoexit: runtime.Goexit in a virtual thread runs its deferred
// calls, makes Join return ErrGoexit, and leaves the scheduler working,
// several times over on one carrier.
func TestGoexit(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1})
	for i := range 5 {
		var deferred atomic.Bool
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			defer deferred.Store(true)
			if i%2 == 1 {
				Yield() // Goexit after having been suspended once
			}
			runtime.Goexit()
			return errors.New("Goexit returned")
		})
		if err := joinWithin(t, vt); !errors.Is(err, ErrGoexit) {
			t.Fatalf("round %d: Join = %v, want ErrGoexit", i, err)
		}
		if !deferred.Load() {
			t.Fatalf("round %d: the deferred call did not run", i)
		}
		if vt.cont != nil {
			// A reused record (every round after the first) keeps its
			// arrays when it ends: the handle must not keep it.
			t.Fatalf("round %d: the handle of a virtual thread ended by Goexit still holds its continuation record", i)
		}
		ok := goOrFatal(t, s, func(ctx context.Context) error { Yield(); return nil })
		if err := joinWithin(t, ok); err != nil {
			t.Fatalf("round %d: the next virtual thread: %v", i, err)
		}
	}
	waitUntil(t, "Live() to drop to 0", func() bool { return s.Live() == 0 })
}

// TestUnparkBeforePark: an Unpark made while the virtual thread is
// running is kept as a permit, and its next Park returns at once; extra
// Unparks do not accumulate.
func TestUnparkBeforePark(t *testing.T) {
	s := boundedSched(t, Options{})
	var started, unparked atomic.Bool
	var parks atomic.Int32
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		started.Store(true)
		for !unparked.Load() {
			Yield() // running, not parked, while the Unpark comes
		}
		Park() // consumes the permit: must not block
		parks.Add(1)
		return nil
	})
	waitUntil(t, "the virtual thread to start", started.Load)
	vt.Unpark()
	vt.Unpark() // a second one before the Park: still one permit
	unparked.Store(true)
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if parks.Load() != 1 {
		t.Fatal("Park did not return")
	}
	vt.Unpark() // of a finished virtual thread: harmless

	// One permit, not two: after two Unparks, the first Park returns and
	// the second blocks until the next Unpark.
	var stage atomic.Int32
	vt = goOrFatal(t, s, func(ctx context.Context) error {
		stage.Store(1)
		for stage.Load() != 2 {
			Yield()
		}
		Park() // the permit
		stage.Store(3)
		Park() // no permit left: blocks until the Unpark below
		stage.Store(4)
		return nil
	})
	waitUntil(t, "stage 1", func() bool { return stage.Load() == 1 })
	vt.Unpark()
	vt.Unpark()
	stage.Store(2)
	waitUntil(t, "stage 3", func() bool { return stage.Load() >= 3 })
	time.Sleep(20 * time.Millisecond)
	if stage.Load() != 3 {
		t.Fatal("the second Park returned without an Unpark: permits accumulated")
	}
	vt.Unpark()
	if err := joinWithin(t, vt); err != nil || stage.Load() != 4 {
		t.Fatalf("Join = %v, stage %d", err, stage.Load())
	}
}

func pingPongRounds() int {
	if testing.Short() || raceEnabled {
		return 10_000
	}
	return 100_000
}

// TestPingPongVThreads: two virtual threads hand a turn back and forth
// with Park and Unpark, on several carriers; a lost wake-up hangs one of
// them, which the bounded Join catches.
func TestPingPongVThreads(t *testing.T) {
	for _, carriers := range []int{1, max(2, runtime.GOMAXPROCS(0)), 4} {
		t.Run(fmt.Sprintf("carriers=%d", carriers), func(t *testing.T) {
			s := boundedSched(t, Options{Carriers: carriers})
			rounds := pingPongRounds()
			var turn atomic.Int32 // 0: a's, 1: b's
			var vtA, vtB atomic.Pointer[VThread]
			var hitsA, hitsB int
			player := func(me int32, self, other *atomic.Pointer[VThread], hits *int) func(context.Context) error {
				return func(ctx context.Context) error {
					self.Store(Current())
					for other.Load() == nil {
						Yield()
					}
					for range rounds {
						for turn.Load() != me {
							Park()
						}
						*hits++
						turn.Store(1 - me)
						other.Load().Unpark()
					}
					return nil
				}
			}
			start := time.Now()
			a := goOrFatal(t, s, player(0, &vtA, &vtB, &hitsA))
			b := goOrFatal(t, s, player(1, &vtB, &vtA, &hitsB))
			if err := joinWithin(t, a); err != nil {
				t.Fatal(err)
			}
			if err := joinWithin(t, b); err != nil {
				t.Fatal(err)
			}
			if hitsA != rounds || hitsB != rounds {
				t.Fatalf("turns taken: a %d, b %d, want %d each", hitsA, hitsB, rounds)
			}
			t.Logf("%d round trips on %d carriers in %v", rounds, carriers, time.Since(start))
		})
	}
}

// TestPingPongGoroutine: a plain goroutine and a virtual thread hand
// a turn back and forth: the goroutine with Unpark, the virtual thread
// with Park and a channel. Fewer rounds than between virtual threads:
// each wakes a sleeping carrier, and with locked carriers (the default on
// the stack-copying backend) that costs two thread switches, some 30µs
// on a small VM.
func TestPingPongGoroutine(t *testing.T) {
	s := boundedSched(t, Options{})
	rounds := pingPongRounds() / 5
	var turn atomic.Int32 // 1: the virtual thread's
	back := make(chan struct{}, 1)
	hits := 0
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		for range rounds {
			for turn.Load() != 1 {
				Park()
			}
			hits++
			turn.Store(0)
			back <- struct{}{} // buffered, and drained before the next turn
		}
		return nil
	})
	start := time.Now()
	timeout := time.After(waitTimeout)
	for i := range rounds {
		turn.Store(1)
		vt.Unpark()
		select {
		case <-back:
		case <-timeout:
			t.Fatalf("lost wake-up: round %d of %d never came back", i, rounds)
		}
	}
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if hits != rounds {
		t.Fatalf("the virtual thread took %d turns, want %d", hits, rounds)
	}
	t.Logf("%d round trips goroutine <-> virtual thread in %v", rounds, time.Since(start))
}

// TestYieldFairness: on one carrier, virtual threads that Yield in a
// loop take turns, round robin.
func TestYieldFairness(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("vthreads=%d", n), func(t *testing.T) {
			s := boundedSched(t, Options{Carriers: 1})
			const turns = 200
			var ready atomic.Int32
			var mu sync.Mutex
			var trace []int
			var vts []*VThread
			for id := range n {
				vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
					ready.Add(1)
					for ready.Load() < int32(n) {
						Yield()
					}
					for range turns {
						mu.Lock()
						trace = append(trace, id)
						mu.Unlock()
						Yield()
					}
					return nil
				}))
			}
			for _, vt := range vts {
				if err := joinWithin(t, vt); err != nil {
					t.Fatal(err)
				}
			}
			if len(trace) != n*turns {
				t.Fatalf("%d turns recorded, want %d", len(trace), n*turns)
			}
			for i := n; i < len(trace); i++ {
				if trace[i] != trace[i-n] {
					t.Fatalf("not round robin at turn %d: ... %v ...", i, trace[max(0, i-2*n):min(len(trace), i+n)])
				}
			}
			for i := 1; i < n; i++ {
				if trace[i] == trace[0] {
					t.Fatalf("the first %d turns are not all different: %v", n, trace[:n])
				}
			}
		})
	}
}

// TestShutdownDrains: Shutdown with a context that does not end waits
// for every running virtual thread to finish, and returns nil.
func TestShutdownDrains(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var finished atomic.Int32
	var started atomic.Int32
	for i := range n {
		goOrFatal(t, s, func(ctx context.Context) error {
			started.Add(1)
			Sleep(time.Duration(10+i) * time.Millisecond)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			finished.Add(1)
			return nil
		})
	}
	waitUntil(t, "the virtual threads to start", func() bool { return started.Load() == n })
	t0 := time.Now()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v, want nil", err)
	}
	if f := finished.Load(); f != n {
		t.Fatalf("Shutdown returned with %d of %d virtual threads finished", f, n)
	}
	if live := s.Live(); live != 0 {
		t.Fatalf("Live() = %d after Shutdown", live)
	}
	t.Logf("Shutdown drained %d sleeping virtual threads in %v", n, time.Since(t0))
}

// TestShutdownExpired: Shutdown whose context ends first cancels the
// virtual threads' contexts, waits for them to finish, and returns the
// context's error. The virtual threads wait in a loop of Park, checking
// ctx.Err(); cancelling a context does not unpark a virtual thread by
// itself, so they arrange that with context.AfterFunc.
func TestShutdownExpired(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var parked atomic.Int32
	var vts []*VThread
	for range n {
		vts = append(vts, goOrFatal(t, s, func(ctx context.Context) error {
			stop := context.AfterFunc(ctx, Current().Unpark)
			defer stop()
			parked.Add(1)
			for ctx.Err() == nil {
				Park()
			}
			return ctx.Err()
		}))
	}
	quick := goOrFatal(t, s, func(ctx context.Context) error {
		Sleep(5 * time.Millisecond)
		return nil
	})
	waitUntil(t, "the virtual threads to park", func() bool { return parked.Load() == n })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Shutdown did not return after its context expired (%d live)", s.Live())
	}
	if d := time.Since(t0); d < 40*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before its context expired", d)
	}
	for _, vt := range vts {
		if err := joinWithin(t, vt); !errors.Is(err, context.Canceled) {
			t.Errorf("%v: Join = %v, want context.Canceled", vt, err)
		}
	}
	if err := joinWithin(t, quick); err != nil {
		t.Errorf("the virtual thread that finished by itself: %v", err)
	}
	if s.Live() != 0 {
		t.Errorf("Live() = %d after Shutdown", s.Live())
	}
}

// TestGoAfterShutdown: Go and GoNamed refuse with ErrClosed once
// Shutdown or Close has run, and Shutdown and Close may be called again.
func TestGoAfterShutdown(t *testing.T) {
	for _, name := range []string{"Shutdown", "Close"} {
		s, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "Shutdown" {
			err = s.Shutdown(context.Background())
		} else {
			err = s.Close()
		}
		if err != nil {
			t.Fatalf("%s = %v", name, err)
		}
		if vt, err := s.Go(func(ctx context.Context) error { return nil }); !errors.Is(err, ErrClosed) || vt != nil {
			t.Errorf("Go after %s = %v, %v; want nil, ErrClosed", name, vt, err)
		}
		if vt, err := s.GoNamed("late", func(ctx context.Context) error { return nil }); !errors.Is(err, ErrClosed) || vt != nil {
			t.Errorf("GoNamed after %s = %v, %v; want nil, ErrClosed", name, vt, err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("a second Shutdown = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close after %s = %v", name, err)
		}
	}
}

// TestNoGoroutineLeak: after Shutdown, every goroutine the scheduler
// started is gone: carriers, the monitor, compensation carriers, carriers
// replaced after a Goexit, and (on the portable backend) the goroutines of
// the virtual threads.
func TestNoGoroutineLeak(t *testing.T) {
	base := goroutines.Settled()
	s, err := New(Options{Carriers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var release atomic.Bool
	var spawned atomic.Int64
	var vts []*VThread
	vts = append(vts,
		goOrFatal(t, s, func(ctx context.Context) error { parkPinnedUntil(&release); return nil }),
		goOrFatal(t, s, func(ctx context.Context) error { parkPinnedUntil(&release); return nil }),
	)
	waitUntil(t, "both carriers to block", func() bool { return s.blocked.Load() == 2 })
	vts = append(vts,
		goOrFatal(t, s, func(ctx context.Context) error {
			_, err := checkedSkynet(s, &spawned, 0, 1000)
			return err
		}),
		goOrFatal(t, s, func(ctx context.Context) error { Sleep(time.Millisecond); runtime.Goexit(); return nil }),
		goOrFatal(t, s, func(ctx context.Context) error { valuePanicker("leak test"); return nil }),
	)
	parked := goOrFatal(t, s, func(ctx context.Context) error {
		for !release.Load() {
			Park()
		}
		return nil
	})
	if err := joinWithin(t, vts[2]); err != nil {
		t.Errorf("skynet: %v", err)
	}
	if err := joinWithin(t, vts[3]); !errors.Is(err, ErrGoexit) {
		t.Errorf("Goexit: Join = %v, want ErrGoexit", err)
	}
	var pe *PanicError
	if err := joinWithin(t, vts[4]); !errors.As(err, &pe) {
		t.Errorf("panic: Join = %v, want a *PanicError", err)
	}
	release.Store(true)
	vts[0].Unpark()
	vts[1].Unpark()
	parked.Unpark()
	shutdownWithin(t, s, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := goroutines.Settled(); got > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Shutdown, %d before:\n%s", got, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestCPUsNeedLockedCarriers: binding an unlocked carrier would bind
// whatever thread it was on at the time; New refuses.
func TestCPUsNeedLockedCarriers(t *testing.T) {
	unlocked := false
	s, err := New(Options{CPUs: []int{0}, LockOSThread: &unlocked})
	if err == nil {
		s.Close()
		t.Fatal("New(CPUs: [0], LockOSThread: false) succeeded, want an error")
	}
}

// TestCPUUnavailable: New refuses CPUs the process may not run on.
func TestCPUUnavailable(t *testing.T) {
	for _, cpus := range [][]int{{100000}, {-1}} {
		s, err := New(Options{CPUs: cpus})
		if err == nil {
			s.Close()
			t.Errorf("New(CPUs: %v) succeeded, want an error", cpus)
			continue
		}
		t.Logf("New(CPUs: %v): %v", cpus, err)
	}
}

// Shutdown with a context that has already ended reports a drained
// scheduler as drained: the select between the two picked either at
// random, and returned ctx.Err() before the carriers had exited about
// half the time.
func TestShutdownEndedContextDrained(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		s, err := New(Options{Carriers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(ctx); err != nil {
			s.Close()
			t.Fatalf("round %d: Shutdown of a scheduler with nothing live = %v, want nil", i, err)
		}
	}
}

// Go racing Shutdown either is refused or runs. Go counts the new thread
// live before it checks closing: otherwise Shutdown could see none live,
// let the carriers exit, and leave an accepted thread that never ran.
func TestGoRacesShutdown(t *testing.T) {
	rounds, perSpawner := 300, math.MaxInt
	if testing.Short() {
		rounds = 50
	}
	if raceEnabled {
		// Under the race detector every virtual thread that runs leaks
		// about 5 KB of the detector's memory (the portable backend's
		// iter.Pull: docs/limitations.md), and at GOMAXPROCS=1 the
		// spawners ran 10,000 to 30,000 a round before Shutdown got
		// the processor: 300 rounds took 10 GB and more. 500 a spawner
		// (each at several microseconds under the detector) still
		// outlast Shutdown's start, at most 50 µs in, wherever the
		// test's goroutine runs beside them.
		rounds, perSpawner = 50, 500
	}
	for round := range rounds {
		s, err := New(Options{Carriers: 2, LockOSThread: new(bool)})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var accepted []*VThread
		var wg, ready sync.WaitGroup
		for range 3 {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				for range perSpawner {
					vt, err := s.Go(nop)
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Go: %v", err)
						}
						return
					}
					mu.Lock()
					accepted = append(accepted, vt)
					mu.Unlock()
				}
			}()
		}
		ready.Wait()
		time.Sleep(time.Duration(round%50) * time.Microsecond)
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, vt := range accepted {
			if !vt.finished() {
				t.Fatalf("round %d: Go accepted a virtual thread that had not run when Shutdown returned (Live=%d)", round, s.Live())
			}
		}
	}
}

// Shutdown and Close called from one of the scheduler's own virtual
// threads panic with a message instead of waiting for themselves.
func TestShutdownFromOwnVThread(t *testing.T) {
	for _, op := range []string{"Shutdown", "Close"} {
		s := newTest(t, Options{Carriers: 1})
		vt := goOrFatal(t, s, func(ctx context.Context) error {
			if op == "Shutdown" {
				s.Shutdown(context.Background())
			} else {
				s.Close()
			}
			return nil
		})
		if !doneWithin(vt, 5*time.Second) {
			t.Fatalf("%s from a virtual thread hangs", op)
		}
		var pe *PanicError
		if err := vt.Join(); !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "own virtual threads") {
			t.Fatalf("%s from a virtual thread: %v, want a panic that says why", op, err)
		}
	}
}

// newTest returns a scheduler made with opts, shut down when the test
// ends.
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
