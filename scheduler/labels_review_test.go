package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/continuation"
)

// TestReviewLabelsGeneratorParksThread: a generator with labels of its own,
// pulled by a virtual thread with others, parks the thread from inside its
// body (Yield, a yield to the thread's scope, enclosing the generator's):
// both are frozen, and resumed on whichever carrier takes the thread next,
// where the generator finds its labels, the thread its own after each
// value, and other threads theirs.
func TestReviewLabelsGeneratorParksThread(t *testing.T) {
	for _, stats := range []bool{false, true} {
		t.Run(fmt.Sprintf("contStats=%v", stats), func(t *testing.T) {
			opts := Options{Carriers: 2}
			if stats {
				opts = WithContStats(opts)
			}
			s := newSched(t, opts)
			var failures atomic.Int32
			fail := func(format string, args ...any) {
				if failures.Add(1) < 10 {
					t.Errorf(format, args...)
				}
			}
			var stopNoise atomic.Bool
			noise := goOrFatal(t, s, func(ctx context.Context) error {
				pprof.Do(ctx, pprof.Labels("thread", "noise"), func(context.Context) {
					own := profLabel()
					for !stopNoise.Load() {
						Yield()
						if got := profLabel(); got != own {
							fail("the noise thread has labels %s, want its own %s", labelsOf(got), labelsOf(own))
							return
						}
					}
				})
				return nil
			})
			vt := goOrFatal(t, s, func(ctx context.Context) error {
				pprof.Do(ctx, pprof.Labels("thread", "puller"), func(context.Context) {
					mine := profLabel()
					next, stop := continuation.Pull(func(yield func(int) bool) {
						pprof.Do(context.Background(), pprof.Labels("gen", "parks"), func(context.Context) {
							gen := profLabel()
							for i := 0; ; i++ {
								for range 3 {
									Yield() // parks the puller too
									if got := profLabel(); got != gen {
										fail("the generator after a park has labels %s, want its own %s", labelsOf(got), labelsOf(gen))
									}
								}
								if i%10 == 0 {
									runtime.GC()
								}
								if !yield(i) {
									return
								}
							}
						})
					})
					defer stop()
					for i := range 100 {
						if v, ok := next(); !ok || v != i {
							fail("next() = %d, %v; want %d, true", v, ok, i)
							return
						}
						if got := profLabel(); got != mine {
							fail("the thread after value %d has labels %s, want its own %s", i, labelsOf(got), labelsOf(mine))
							return
						}
					}
				})
				return nil
			})
			if err := vt.Join(); err != nil {
				t.Fatal(err)
			}
			stopNoise.Store(true)
			if err := noise.Join(); err != nil {
				t.Fatal(err)
			}
			_ = unsafe.Pointer(nil)
		})
	}
}
