package bench

import (
	"context"
	"fmt"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// The benchmarks, in the order they run and are reported. The peers they
// compare are built in roundtrip_test.go, memory_test.go,
// generator_test.go and coroutine_test.go.

// depths are the stack depths the round trips are measured at.
var depths = []int{1, 10, 100, 1000}

// BenchmarkRoundTrip measures one resume and one suspension of a body
// suspended at each depth, for every peer: ns/op is one round trip.
func BenchmarkRoundTrip(b *testing.B) {
	for _, pr := range peers {
		for _, d := range depths {
			b.Run(fmt.Sprintf("impl=%s/depth=%d", pr.name, d), func(b *testing.B) {
				b.ReportAllocs()
				p := pr.new(d, nil)
				p.measure(b)
			})
		}
	}
}

// BenchmarkLabelledRoundTrip is BenchmarkRoundTrip at depth 1 with pprof
// labels in use: the goroutine that resumes the body has labels, and the
// body has others of its own, set before its first suspension. A
// goroutine or iter.Pull's body keeps its labels in its own g for nothing;
// weft's stack-copying backend, which runs the body on the resuming
// goroutine, swaps the two sets at every resume and suspension (docs/api.md,
// "Profiler labels").
func BenchmarkLabelledRoundTrip(b *testing.B) {
	defer pprof.SetGoroutineLabels(context.Background())
	body := func() {
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("bench", "body")))
	}
	for _, pr := range peers {
		b.Run("impl="+pr.name, func(b *testing.B) {
			b.ReportAllocs()
			pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("bench", "runner")))
			p := pr.new(1, body)
			p.measure(b)
			pprof.SetGoroutineLabels(context.Background())
		})
	}
}

// BenchmarkSuspendedMemory measures the memory one suspended unit holds
// and the time to create it and run it to its first suspension, over
// memCount units suspended at depth memDepth, for a weft continuation, a
// continuation.Pull, an iter.Pull and a parked goroutine. Each iteration
// measures a fresh batch. It reports
//
//   - B/suspended: heap plus stack, from runtime.MemStats HeapInuse +
//     StackInuse after runtime.GC, and its two parts heap-B/suspended
//     and stack-B/suspended;
//   - ns/suspend: the time to create one and run it to its first
//     suspension.
//
// ns/op, the time for a whole batch with its collections, means nothing
// and is not reported.
func BenchmarkSuspendedMemory(b *testing.B) {
	benchMemory(b, suspenders, "suspended", "suspend")
}

// benchMemory runs a sub-benchmark per suspender that measures memCount
// suspended units per iteration and reports B/<state> (with its heap and
// stack parts) and ns/<verb>, the time to create one and suspend it.
func benchMemory(b *testing.B, set []suspender, state, verb string) {
	for _, s := range set {
		b.Run("impl="+s.name, func(b *testing.B) {
			warmGoroutines(memCount + 256)
			var heap, stack int64
			var elapsed time.Duration
			for range b.N {
				h, st, el := measureSuspended(s, memCount)
				heap += h
				stack += st
				elapsed += el
			}
			units := float64(b.N) * memCount
			b.ReportMetric(float64(heap+stack)/units, "B/"+state)
			b.ReportMetric(float64(heap)/units, "heap-B/"+state)
			b.ReportMetric(float64(stack)/units, "stack-B/"+state)
			b.ReportMetric(float64(elapsed.Nanoseconds())/units, "ns/"+verb)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkGenerator sums a genLen-element sequence: one op is a whole
// sum, creating and stopping the pull iterator included; ns/elem is the
// cost per element.
func BenchmarkGenerator(b *testing.B) {
	seq := count(genLen)
	for _, g := range generators {
		b.Run("impl="+g.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if got := g.sum(seq); got != genSum {
					b.Fatalf("sum = %d, want %d", got, genSum)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*genLen), "ns/elem")
		})
	}
}

// BenchmarkCoroutineResume measures one Resume of a suspended typed
// coroutine: ns/op is one round trip with a value passed each way.
func BenchmarkCoroutineResume(b *testing.B) {
	for _, k := range coroutines {
		b.Run("impl="+k.name, func(b *testing.B) {
			b.ReportAllocs()
			c := k.new()
			c.resume(0)
			b.ResetTimer()
			for i := range b.N {
				if c.resume(i) != i+1 {
					b.Fatal("wrong value")
				}
			}
			b.StopTimer()
			if c.resume(-1) != -1 || !c.isDone() {
				b.Fatal("coroutine did not finish")
			}
		})
	}
}

// BenchmarkShortPull measures a short-lived pull iterator: one op creates
// it over count(take), takes take values (1 or 10) and stops it.
func BenchmarkShortPull(b *testing.B) {
	for _, take := range []int{1, 10} {
		for _, p := range pulls {
			b.Run(fmt.Sprintf("impl=%s/take=%d", p.name, take), func(b *testing.B) {
				b.ReportAllocs()
				want := take * (take - 1) / 2
				for range b.N {
					if got := pullTake(p.pull, take, take); got != want {
						b.Fatalf("sum = %d, want %d", got, want)
					}
				}
			})
		}
	}
}

// BenchmarkTreeWalk sums the values of a balanced treeSize-node tree
// through a pull iterator over its recursive in-order sequence: one op is
// a whole walk. Between two values the sequence returns from some frames
// and calls new ones.
func BenchmarkTreeWalk(b *testing.B) {
	t := balanced(0, treeSize)
	seq := t.all()
	const want = treeSize * (treeSize - 1) / 2
	for _, p := range pulls {
		b.Run("impl="+p.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if got := sumPull(p.pull, seq); got != want {
					b.Fatalf("sum = %d, want %d", got, want)
				}
			}
		})
	}
	b.Run("impl=range", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if got := sumRange(seq); got != want {
				b.Fatalf("sum = %d, want %d", got, want)
			}
		}
	})
}

// BenchmarkNewRunRun measures a continuation's whole life: New, a Run to
// its one yield, and a Run to its end.
func BenchmarkNewRunRun(b *testing.B) {
	s := scope.New("bench")
	body := func() { continuation.Yield(s) }
	b.ReportAllocs()
	for range b.N {
		newRunRun(s, body)
	}
}

// BenchmarkUnwind measures one iteration of a body that recurses depth
// fresh frames, suspends at the bottom, and returns through them all
// when resumed: ns/op is that iteration, its resume included.
func BenchmarkUnwind(b *testing.B) {
	for _, u := range unwinders {
		for _, d := range []int{10, 50, 200} {
			b.Run(fmt.Sprintf("impl=%s/depth=%d", u.name, d), func(b *testing.B) {
				b.ReportAllocs()
				w := u.new(d)
				w.measure(b)
			})
		}
	}
}
