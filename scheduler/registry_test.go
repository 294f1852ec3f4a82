package scheduler

import (
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// parkDeep parks the calling virtual thread n calls deep, until unparked.
//
//go:noinline
func parkDeep(n int) {
	if n == 0 {
		Park()
		return
	}
	parkDeep(n - 1)
}

// waitParked waits until vt has parked.
func waitParked(t *testing.T, vt *VThread) {
	t.Helper()
	for vt.state.Load() != vtParked {
		time.Sleep(time.Millisecond)
	}
}

func TestThreadsListsParked(t *testing.T) {
	s, err := New(Options{Carriers: 2, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Tracking() {
		t.Fatal("Tracking is false with TrackThreads")
	}
	var vts []*VThread
	for i := range 3 {
		pprof.Do(context.Background(), pprof.Labels("worker", "w"), func(context.Context) {
			vt, err := s.GoNamed("p", func(context.Context) error { parkDeep(4 + i); return nil })
			if err != nil {
				t.Fatal(err)
			}
			vts = append(vts, vt)
		})
	}
	for _, vt := range vts {
		waitParked(t, vt)
	}
	n := 0
	for info := range s.Threads() {
		n++
		if info.State != Parked || info.Name != "p" || info.Labels["worker"] != "w" || info.Carrier != -1 {
			t.Errorf("thread %d: %v %q %v carrier %d, want parked \"p\" worker=w carrier -1", info.ID, info.State, info.Name, info.Labels, info.Carrier)
		}
		if info.ParkedSince.IsZero() {
			t.Errorf("thread %d: no ParkedSince", info.ID)
		}
		deep := 0
		for _, f := range info.Stack {
			if strings.HasSuffix(f.Function, ".parkDeep") {
				deep++
			}
		}
		if want := 5 + int(info.ID-vts[0].ID()); deep != want {
			t.Errorf("thread %d: %d parkDeep frames, want %d: %v", info.ID, deep, want, info.Stack)
		}
		created, _ := runtime.CallersFrames(info.CreatedBy).Next()
		if !strings.Contains(created.Function, "TestThreadsListsParked") {
			t.Errorf("thread %d created by %s", info.ID, created.Function)
		}
	}
	if n != 3 {
		t.Errorf("Threads listed %d, want 3", n)
	}
	if info, ok := s.Thread(vts[1].ID()); !ok || info.ID != vts[1].ID() {
		t.Errorf("Thread(%d) = %v, %v", vts[1].ID(), info.ID, ok)
	}
	st := s.State()
	if st.Live != 3 || len(st.Carriers) != 2 || !st.Tracking {
		t.Errorf("State = %+v", st)
	}
	for _, vt := range vts {
		vt.Unpark()
		vt.Join()
	}
	for range s.Threads() {
		t.Error("a thread listed after all ended")
	}
}

func TestThreadsUntracked(t *testing.T) {
	s, err := New(Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vt, _ := s.Go(func(context.Context) error { Park(); return nil })
	waitParked(t, vt)
	for range s.Threads() {
		t.Error("an untracked scheduler listed a thread")
	}
	if s.State().Live != 1 {
		t.Error("State does not count the parked thread")
	}
	vt.Unpark()
	vt.Join()
}

// TestRegistryDropsThreads checks that the registry keeps no ended
// virtual thread: its handle, once dropped, is collected, and the entry
// is gone.
func TestRegistryDropsThreads(t *testing.T) {
	s, err := New(Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	collected := make(chan uint64, 8)
	for range 8 {
		vt, _ := s.Go(func(context.Context) error { parkDeep(3); return nil })
		waitParked(t, vt)
		vt.Unpark()
		vt.Join()
		runtime.AddCleanup(vt, func(id uint64) { collected <- id }, vt.ID())
	}
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got < 8 && time.Now().Before(deadline); {
		runtime.GC()
		select {
		case <-collected:
			got++
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got != 8 {
		t.Fatalf("%d of 8 ended virtual threads collected", got)
	}
	n := 0
	for i := range s.reg.shards {
		sh := &s.reg.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	if n != 0 {
		t.Errorf("the registry holds %d entries", n)
	}
}

func TestDecodeLabels(t *testing.T) {
	pprof.Do(context.Background(), pprof.Labels("a", "1", "b", "2"), func(ctx context.Context) {
		got := decodeLabels(profLabel())
		n := 0
		pprof.ForLabels(ctx, func(k, v string) bool {
			n++
			if got[k] != v {
				t.Errorf("label %s = %q, want %q", k, got[k], v)
			}
			return true
		})
		if n != len(got) || n != 2 {
			t.Errorf("decoded %v, want 2 labels", got)
		}
	})
	if decodeLabels(unsafe.Pointer(nil)) != nil {
		t.Error("no labels decode to a map")
	}
}

// spinOuter, spinMiddle and spinInner compute, three calls deep, until
// stop is set; running is set once they are inside.
//
//go:noinline
func spinOuter(running, stop *atomic.Bool) { spinMiddle(running, stop) }

//go:noinline
func spinMiddle(running, stop *atomic.Bool) { spinInner(running, stop) }

//go:noinline
func spinInner(running, stop *atomic.Bool) {
	running.Store(true)
	for !stop.Load() {
		runtime.Gosched()
	}
}

// wantInOrder reports whether fns appear in frames in that order, and
// the last frame is vthreadBody.
func wantInOrder(frames []runtime.Frame, fns ...string) bool {
	i := 0
	for _, f := range frames {
		if i < len(fns) && strings.HasSuffix(f.Function, fns[i]) {
			i++
		}
	}
	return i == len(fns) && len(frames) > 0 && strings.HasSuffix(frames[len(frames)-1].Function, ".vthreadBody")
}

func TestThreadsShowsRunningStack(t *testing.T) {
	s, err := New(Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var running, stop atomic.Bool
	vt, err := s.GoNamed("spin", func(context.Context) error { spinOuter(&running, &stop); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for !running.Load() {
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		runtime.GC()
		info, ok := s.Thread(vt.ID())
		if !ok || info.State != Running || info.Carrier != 0 {
			t.Fatalf("spinning thread: %v %v carrier %d, want running on carrier 0", ok, info.State, info.Carrier)
		}
		if !wantInOrder(info.Stack, ".spinInner", ".spinMiddle", ".spinOuter") {
			t.Fatalf("running thread's stack %v, want spinInner, spinMiddle, spinOuter down to vthreadBody", info.Stack)
		}
		for _, f := range info.Stack {
			if f.File == "" || f.Line == 0 {
				t.Errorf("frame %+v has no file or line", f)
			}
		}
		n := 0
		for info := range s.Threads() {
			n++
			if info.ID == vt.ID() && !wantInOrder(info.Stack, ".spinInner", ".spinMiddle", ".spinOuter") {
				t.Fatalf("Threads: running thread's stack %v", info.Stack)
			}
		}
		if n != 1 {
			t.Fatalf("Threads listed %d threads, want 1", n)
		}
	}
	stop.Store(true)
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}

func TestThreadFrames(t *testing.T) {
	block := `goroutine 7 [running]:
main.f(0x1, ...)
	/src/main.go:10 +0x1d
github.com/weftrt/weft/scheduler.vthreadBody()
	/src/scheduler/spawn.go:150 +0x40
github.com/weftrt/weft.(*Cont).Run(0xc000010000)
	/src/cont.go:99 +0x22
created by main.main in goroutine 1
	/src/main.go:3 +0x10`
	got := threadFrames(block)
	if len(got) != 2 || got[0].Function != "main.f" || got[0].File != "/src/main.go" || got[0].Line != 10 ||
		got[1].Function != "github.com/weftrt/weft/scheduler.vthreadBody" || got[1].Line != 150 {
		t.Errorf("threadFrames: %+v", got)
	}
	if got := threadFrames(strings.Replace(block, "vthreadBody", "other", 1)); got != nil {
		t.Errorf("threadFrames without vthreadBody: %+v, want nil", got)
	}
}

// yieldOuter and yieldInner yield, two calls deep, until stop is set;
// started is set once they are inside.
//
//go:noinline
func yieldOuter(started, stop *atomic.Bool) { yieldInner(started, stop) }

//go:noinline
func yieldInner(started, stop *atomic.Bool) {
	started.Store(true)
	for !stop.Load() {
		Yield()
	}
}

func TestThreadsShowsQueuedStack(t *testing.T) {
	s, err := New(Options{Carriers: 1, MaxCompensation: -1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var started, running, stop atomic.Bool
	yielder, err := s.Go(func(context.Context) error { yieldOuter(&started, &stop); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for !started.Load() {
		time.Sleep(time.Millisecond)
	}
	spinner, err := s.Go(func(context.Context) error { spinOuter(&running, &stop); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for !running.Load() {
		time.Sleep(time.Millisecond)
	}
	// The spinner keeps the only carrier; the yielder waits queued.
	var states []ThreadState
	for info := range s.Threads() {
		states = append(states, info.State)
		switch info.ID {
		case yielder.ID():
			if !wantInOrder(info.Stack, ".yieldInner", ".yieldOuter") {
				t.Errorf("queued thread's stack %v, want yieldInner, yieldOuter down to vthreadBody", info.Stack)
			}
		case spinner.ID():
			if !wantInOrder(info.Stack, ".spinInner", ".spinMiddle", ".spinOuter") {
				t.Errorf("running thread's stack %v", info.Stack)
			}
		}
	}
	if len(states) != 2 || states[0] != Queued || states[1] != Running {
		t.Errorf("states %v, want [queued running]", states)
	}
	stop.Store(true)
	if err := spinner.Join(); err != nil {
		t.Fatal(err)
	}
	if err := yielder.Join(); err != nil {
		t.Fatal(err)
	}
}
