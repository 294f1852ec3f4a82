// Package scheduler runs virtual threads: functions running in
// continuations on carrier goroutines. As in OpenJDK, a virtual thread
// parks by yielding its continuation, not by blocking a thread.
//
// A Scheduler has N carriers, GOMAXPROCS by default. On the
// stack-copying backend each is locked to its OS thread, optionally
// bound to a CPU. Each carrier has a run queue, and idle carriers steal.
// Go starts a virtual thread. Join from a plain goroutine may run the
// thread itself, as an idle carrier, which saves a hand-off between OS
// threads each way. Park and Unpark follow LockSupport: a
// permit means no lost wake-ups. Sleep, Yield and the synchronisation
// types park the calling virtual thread and free its carrier for others.
// A virtual thread with a pinned stack cannot be suspended: a cgo
// callback, a reflect.MakeFunc function, pinning.Do. It blocks its
// carrier instead, and the scheduler starts an extra carrier for a while.
// Pins reports why and where.
//
// Join returns a virtual thread's panic as a *PanicError. Panics never
// reach a carrier, unless Options.OnPanic panics in turn. The
// deterministic mode makes interleavings reproducible for simulation
// tests: one carrier, a seeded choice of the next thread, a virtual
// clock.
package scheduler
