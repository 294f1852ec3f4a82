// Package netpoll connects the scheduler's carriers to vnet's poller
// without an import cycle: vnet installs a function that checks for I/O
// readiness without blocking, and a carrier that runs out of work calls
// it before it sleeps, so that a virtual thread whose socket became ready
// runs on that carrier at once instead of waiting for the poller
// goroutine to be scheduled.
package netpoll

import "sync/atomic"

var poll atomic.Pointer[func() bool]

// Install sets the readiness check; nil removes it.
func Install(f func() bool) {
	if f == nil {
		poll.Store(nil)
		return
	}
	poll.Store(&f)
}

// Poll runs the installed check, if any, and reports whether it woke
// anything.
func Poll() bool {
	if f := poll.Load(); f != nil {
		return (*f)()
	}
	return false
}
