package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"
)

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
