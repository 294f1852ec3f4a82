// Package scheduler runs virtual threads: functions running in
// continuations, scheduled on carrier goroutines, that park by yielding
// their continuation instead of blocking a thread, as OpenJDK's virtual
// threads do.
//
// A Scheduler has N carriers (GOMAXPROCS by default), each locked to its
// OS thread on the stack-copying backend and optionally bound to a CPU,
// with a run queue each and work stealing between them. Go starts a
// virtual thread; Park and Unpark follow LockSupport (a permit: no lost
// wake-ups); Sleep, Yield and the synchronisation types park the calling
// virtual thread and leave its carrier free for others. A virtual thread
// that cannot be suspended (its stack is pinned: a cgo callback, a reflect
// call, pinning.Do...) blocks its carrier instead, and the scheduler starts
// an extra carrier for a while so the rest go on; Pins reports why and
// where.
//
// Panics in a virtual thread are recovered and returned by Join as a
// *PanicError; they never reach a carrier (unless Options.OnPanic panics
// in turn). A deterministic mode (one
// carrier, a seeded choice of the next virtual thread, a virtual clock)
// makes interleavings reproducible for simulation tests.
package scheduler
