// Package scheduler will run virtual threads: continuations wrapped as
// tasks on carrier goroutines locked to OS threads, with park/unpark,
// timers, I/O readiness and synchronisation that parks instead of blocking.
//
// It has no API yet. Until it does, build executors directly on package
// continuation; docs/limitations.md records what the portable backend
// requires of a scheduler (continuations must be resumed under the
// thread-lock state they were first run under).
package scheduler
