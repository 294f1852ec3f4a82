package bench

import (
	"testing"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/scheduler"
)

// BenchmarkProfiling measures what each of package vtprof's profiles
// costs the scheduler while it is on: a park/unpark round trip on one
// carrier (PingPong's op) and a spawn and join from a virtual thread
// (Spawn's), with the thread registry (TrackThreads), with the park
// profile recording every park (SetParkProfileRate(1)), and with mounts
// recorded for a whole-stack CPU profile (scheduler.RecordMounts, without
// the runtime's profiler itself). PingPong and Spawn are the same ops
// with every profile off.
func BenchmarkProfiling(b *testing.B) {
	configs := []struct {
		name  string
		opts  scheduler.Options
		setup func(s *scheduler.Scheduler) (stop func())
	}{
		{"tracking", scheduler.Options{Carriers: 1, TrackThreads: true}, nil},
		{"parks", scheduler.Options{Carriers: 1}, func(s *scheduler.Scheduler) func() {
			s.SetParkProfileRate(1)
			return func() { s.SetParkProfileRate(0) }
		}},
		{"freeze", scheduler.Options{Carriers: 1}, func(*scheduler.Scheduler) func() {
			weft.SetFreezeProfileRate(1)
			return func() { weft.SetFreezeProfileRate(0) }
		}},
		{"mounts", scheduler.Options{Carriers: 1}, func(*scheduler.Scheduler) func() {
			stop, ok := scheduler.RecordMounts()
			if !ok {
				panic("mounts already recorded")
			}
			return func() { stop() }
		}},
	}
	for _, c := range configs {
		run := func(b *testing.B, op func(s *scheduler.Scheduler, n int)) {
			s := newScheduler(c.opts)
			stop := func() {}
			if c.setup != nil {
				stop = c.setup(s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			op(s, b.N)
			b.StopTimer()
			stop()
			shutdown(s)
		}
		b.Run("op=pingpong/profile="+c.name, func(b *testing.B) {
			run(b, func(s *scheduler.Scheduler, n int) { pingPongVThreads(s, n) })
		})
		b.Run("op=spawn/profile="+c.name, func(b *testing.B) { run(b, spawnJoinVThreadsInside) })
	}
}
