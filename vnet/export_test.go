//go:build linux

package vnet

import (
	"testing"

	"golang.org/x/sys/unix"
)

func init() { countParks = true }

// ParkCounts returns how many times reads (Read, Accept) and writes
// (Write, connect) have parked waiting for readiness.
func ParkCounts() (reads, writes uint64) {
	return stats.readParks.Load(), stats.writeParks.Load()
}

// Spliced returns how many bytes ReadFrom and WriteTo have moved with
// splice(2).
func Spliced() uint64 { return stats.spliced.Load() }

// PollerActive reports whether a poller is running (some socket is open).
func PollerActive() bool {
	pollMu.Lock()
	defer pollMu.Unlock()
	return current != nil
}

// SetBlockingPoll makes pollers started from now on block in epoll_wait,
// the loop's fallback where the runtime will not poll its descriptor.
func SetBlockingPoll(on bool) { blockingPoll.Store(on) }

// PollNowAllocs returns the average number of allocations of the carriers'
// look for readiness (pollNow) with a poller running, and of a readiness
// edge that wakes one waiter queued on a direction that had queued one
// before (pollDesc.ready), over runs runs each.
func PollNowAllocs(runs int) (look, edge float64) {
	look = testing.AllocsPerRun(runs, func() { pollNow() })
	pd := &pollDesc{}
	w := &waiter{ch: make(chan struct{}, 1)}
	requeue := func() {
		pd.mu.Lock()
		pd.r.waiters = append(pd.r.waiters, w)
		pd.mu.Unlock()
	}
	requeue()
	pd.ready(unix.EPOLLIN)
	<-w.ch
	edge = testing.AllocsPerRun(runs, func() {
		w.woken.Store(false)
		requeue()
		pd.ready(unix.EPOLLIN)
		<-w.ch
	})
	return look, edge
}
