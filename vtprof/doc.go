// Package vtprof makes weft's virtual threads visible to go tool pprof:
// what the goroutine profile, the block profile and the CPU profile show
// of goroutines, and what jcmd and JFR show of Loom's virtual threads.
//
//   - A thread dump (WriteThreads, WriteThreadsJSON): every virtual thread
//     of a scheduler that tracks its threads (scheduler.Options.
//     TrackThreads), running, queued, parked or pinned, with its ID, name,
//     state, carrier, labels, group, parked time, creation site and stack,
//     in the goroutine profile's three formats and in jcmd's JSON shape.
//   - A CPU profile with whole stacks (StartCPUProfile): samples taken while
//     a virtual thread runs on the stack-copying backend show the frames
//     still frozen under its return barrier too, down to its body, under a
//     root frame naming the thread.
//   - The pinning profile (WritePinProfile), JFR's jdk.VirtualThreadPinned:
//     where parks and yields could not suspend their thread, why, and how
//     long they blocked a carrier.
//   - The park profile (WriteParkProfile): the block profile for parks.
//   - A dump of continuations that a program keeps suspended itself
//     (WriteContinuations): a generator pool, an actor system.
//   - An HTTP handler serving them all (Handler), in the manner of
//     net/http/pprof.
//
// docs/profiling.md shows each with real output.
package vtprof
