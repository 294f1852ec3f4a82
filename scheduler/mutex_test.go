package scheduler

import (
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
