// Package bench holds weft's benchmarks: weft's continuations measured
// side by side with their peers in one `go test -bench` run, so that the
// ratios between them come from the same machine, process and moment.
//
// The package has no API; everything is in its _test.go files.
//
//   - BenchmarkRoundTrip: one resume plus one suspension (a Run and the
//     Yield that returns from it) with the body suspended at stack depth
//     1, 10, 100 and 1000, for a weft continuation (impl=weft), a
//     continuation.Pull iterator (impl=weft.Pull), an iter.Pull iterator
//     (impl=iter.Pull) and a goroutine ping-ponging over two unbuffered
//     channels (impl=goroutine). The depth is the number of frames of an
//     ordinary recursive function between the body and the yield point.
//   - BenchmarkSuspendedMemory: the heap and stack memory held by one
//     suspended continuation at depth 3, measured over 10,000 of them as
//     the growth of runtime.MemStats HeapInuse+StackInuse (after
//     runtime.GC), against a continuation.Pull, an iter.Pull and a
//     goroutine parked on a channel. It reports B/suspended (and its parts
//     heap-B/suspended and stack-B/suspended), and ns/suspend, the time to
//     create one and run it to its first suspension; it reports no ns/op.
//     Goroutine descriptors, which the runtime never frees and reuses, are
//     counted for no peer (see warmGoroutines).
//   - BenchmarkGenerator: summing a 1,000-element iter.Seq through
//     continuation.Pull, iter.Pull and a plain range-over-func loop; one
//     op is the whole sum, including creating and stopping the iterator,
//     and ns/elem is ns/op divided by 1,000.
//   - BenchmarkCoroutineResume: one Resume of a continuation.Coroutine,
//     against the same typed coroutine written by hand on iter.Pull.
//   - BenchmarkReflectRoundTrip: a round trip whose body calls a function
//     that yields once, directly (call=direct) or through
//     reflect.Value.Call (call=reflect), for a weft continuation and an
//     iter.Pull iterator: the cost of freezing and thawing reflect's
//     frames.
//   - BenchmarkShortPull: a pull iterator created, one or ten values
//     taken, and stopped, for continuation.Pull and iter.Pull.
//   - BenchmarkTreeWalk: summing a balanced 65,536-node tree through a
//     pull iterator over its recursive in-order iter.Seq, for
//     continuation.Pull, iter.Pull and a plain range-over-func loop.
//   - BenchmarkNewRunRun: a continuation created, run to its one yield
//     and run to its end.
//   - BenchmarkUnwind: one iteration of a body that recurses 10, 50 or
//     200 fresh frames, suspends at the bottom and, resumed, returns
//     through them all (Loom's "pattern B"), for a weft continuation and
//     iter.Pull.
//   - BenchmarkSkynet: the skynet tree, a million leaves and 1,111,111
//     units spawned, joined and summed, as virtual threads of a
//     scheduler (impl=vthread) and as the classic goroutines with
//     unbuffered channels (impl=goroutine); one op is the whole tree,
//     ns/spawn is per unit.
//   - BenchmarkSpawn: starting one unit that does nothing and waiting for
//     it: a virtual thread started and joined from a goroutine
//     (from=goroutine) or from a virtual thread (from=vthread), against
//     go plus a sync.WaitGroup.
//   - BenchmarkParkedMemory: as BenchmarkSuspendedMemory, for 10,000
//     virtual threads parked in scheduler.Park (impl=vthread) or in a
//     Recv on a scheduler.Chan each (impl=vthread-recv) against 10,000
//     goroutines parked on a channel: B/parked, heap-B/parked,
//     stack-B/parked and ns/park.
//   - BenchmarkPingPong: one round trip between two virtual threads that
//     Park until the other Unparks them, on one carrier and on GOMAXPROCS
//     carriers, against two goroutines over unbuffered channels.
//   - BenchmarkChanPingPong: a message and its answer between two
//     virtual threads over two unbuffered scheduler.Chans, on GOMAXPROCS
//     carriers and on one, against two goroutines over Go channels.
//   - BenchmarkEcho: one 1 KB message's round trip through an echo server
//     on 127.0.0.1 with 32 concurrent clients: virtual threads over vnet
//     (carriers locked to their threads, and not), against a
//     goroutine-per-connection server over package net.
//
// Benchmarks run with GODEBUG=adaptivestackstart=0, so that goroutine
// peers start with the 2 KB minimum stack whatever ran before them: the
// test binary runs itself again with it if it is not set.
//
// Sub-benchmarks are named key=value (impl=weft/depth=10) so that
// benchstat can slice them. Run them all, several times, and compare:
//
//	go test -run='^$' -bench=. -count=6 ./bench | tee bench.txt
//	benchstat -filter '.name:RoundTrip .unit:sec/op' -col '/impl@(iter.Pull weft weft.Pull goroutine)' -row /depth bench.txt
//	benchstat -filter '.name:SuspendedMemory' -col /impl bench.txt
//
// and both backends side by side (the backend is fixed per process):
//
//	bench/compare.sh 6 > bench.txt
//
// and against a recorded run:
//
//	benchstat bench/testdata/both-linux-amd64.txt bench.txt
//
// A quick smoke run, as CI does it:
//
//	go test -run='^$' -bench=. -benchtime=1x ./bench
//
// `go test ./bench` runs only the tests that check the benchmark helpers
// (each peer suspends at the depth it claims and yields as often as it is
// resumed, and tears down every goroutine it started; the scheduler
// benchmarks' skynets sum correctly, their ping-pongs take the turns they
// claim, and they leave no goroutine behind).
//
// The results, the machine they were taken on and how to read them are in
// docs/benchmarks.md; testdata holds the raw output they came from, and
// bench/plot turns raw output into the round-trip chart there.
package bench
