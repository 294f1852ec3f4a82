//go:build linux

package vnet

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
