package scheduler

import (
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
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
