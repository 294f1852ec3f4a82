package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
)

// TestLabelsFollowVirtualThread: a virtual thread starts with the pprof
// labels of the goroutine that called Go; labels it sets stay with it
// across parks, however many carriers it moves between; and a virtual
// thread without labels never sees another's, on one carrier or two.
// Before, labels were the carrier goroutine's: a thread that set some
// and parked left them to the next thread on that carrier (and to the
// carrier's own samples), and the spawner's were never inherited.
func TestLabelsFollowVirtualThread(t *testing.T) {
	for _, carriers := range []int{1, 2} {
		t.Run(fmt.Sprintf("carriers=%d", carriers), func(t *testing.T) {
			s := newSched(t, Options{Carriers: carriers})
			defer pprof.SetGoroutineLabels(context.Background())
			pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("who", "spawner")))
			spawner := profLabel()
			var failures atomic.Int32
			fail := func(format string, args ...any) {
				failures.Add(1)
				t.Errorf(format, args...)
			}
			const rounds = 200
			var labelled []*VThread
			for i := range 4 {
				labelled = append(labelled, goOrFatal(t, s, func(ctx context.Context) error {
					if got := profLabel(); got != spawner {
						fail("thread %d started with labels %p, want the spawner's %p", i, got, spawner)
					}
					pprof.Do(ctx, pprof.Labels("req", fmt.Sprint(i)), func(context.Context) {
						own := profLabel()
						for r := range rounds {
							Yield()
							if r%3 == 0 {
								runtime.GC()
							}
							if got := profLabel(); got != own {
								fail("thread %d, round %d: labels %p after a yield, want its own %p", i, r, got, own)
								return
							}
						}
					})
					// pprof.Do ends by setting ctx's labels, which has
					// none (Go's context came from context.Background),
					// as it does in a goroutine.
					if got := profLabel(); got != nil {
						fail("thread %d ended pprof.Do with labels %s, want its context's: none", i, labelsOf(got))
					}
					return nil
				}))
			}
			pprof.SetGoroutineLabels(context.Background())
			var plain []*VThread
			for i := range 4 {
				plain = append(plain, goOrFatal(t, s, func(ctx context.Context) error {
					for r := range rounds {
						if got := profLabel(); got != nil {
							fail("unlabelled thread %d, round %d, has labels %p (%s)", i, r, got, labelsOf(got))
							return nil
						}
						Yield()
					}
					return nil
				}))
			}
			for _, vt := range append(labelled, plain...) {
				if err := vt.Join(); err != nil {
					t.Fatal(err)
				}
			}
			// A thread started afterwards on the same carriers: none of
			// the others' labels were left on them.
			vt := goOrFatal(t, s, func(context.Context) error {
				if got := profLabel(); got != nil {
					fail("a thread started later has labels %s", labelsOf(got))
				}
				return nil
			})
			if err := vt.Join(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// labelsOf formats the labels l points to, for a failure message: the
// runtime's labels are a runtime/pprof labelMap, a slice of key-value
// pairs since Go 1.24.
func labelsOf(l unsafe.Pointer) string {
	if l == nil {
		return "none"
	}
	type label struct{ key, value string }
	return fmt.Sprint(*(*[]label)(l))
}

// TestLabelsInGoroutineProfile checks labels where the profiler reads
// them: the goroutine profile of a virtual thread that set labels, parked
// and resumed shows them on the goroutine that runs it, and the profile
// of another thread on the same carrier meanwhile shows none.
func TestLabelsInGoroutineProfile(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	parked := make(chan struct{})
	var labelled *VThread
	labelled = goOrFatal(t, s, func(ctx context.Context) error {
		var err error
		pprof.Do(ctx, pprof.Labels("request", "r42"), func(context.Context) {
			close(parked)
			Park()
			err = profileShows(labelledMarker, `"request":"r42"`)
		})
		return err
	})
	<-parked
	other := goOrFatal(t, s, func(context.Context) error {
		defer labelled.Unpark()
		return profileShows(unlabelledMarker, "")
	})
	if err := other.Join(); err != nil {
		t.Error(err)
	}
	if err := labelled.Join(); err != nil {
		t.Error(err)
	}
}

const (
	labelledMarker   = "labelledProfileMarker"
	unlabelledMarker = "unlabelledProfileMarker"
)

// profileShows takes a goroutine profile from a frame named marker and
// checks the labels the profile gives its goroutine: want among them, or
// none if want is empty.
func profileShows(marker, want string) error {
	var buf bytes.Buffer
	if marker == labelledMarker {
		labelledProfileMarker(&buf)
	} else {
		unlabelledProfileMarker(&buf)
	}
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(rec, marker) {
			continue
		}
		var labels string
		for _, line := range strings.Split(rec, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				labels = l
			}
		}
		switch {
		case want == "" && labels != "":
			return fmt.Errorf("%s: the goroutine profile gives labels %s, want none", marker, labels)
		case want != "" && !strings.Contains(labels, want):
			return fmt.Errorf("%s: the goroutine profile gives labels %q, want %s", marker, labels, want)
		}
		return nil
	}
	return fmt.Errorf("no goroutine in the profile runs %s:\n%s", marker, buf.String())
}

//go:noinline
func labelledProfileMarker(buf *bytes.Buffer) { pprof.Lookup("goroutine").WriteTo(buf, 1) }

//go:noinline
func unlabelledProfileMarker(buf *bytes.Buffer) { pprof.Lookup("goroutine").WriteTo(buf, 1) }

// TestLabelsAcrossJoin: a child started by a labelled virtual thread
// inherits its labels; labels the child sets are its own, whether Join
// runs it inside the joiner (on the joiner's goroutine) or another
// carrier runs it; and the joiner has its own back after the Join.
func TestLabelsAcrossJoin(t *testing.T) {
	for _, carriers := range []int{1, 2} {
		t.Run(fmt.Sprintf("carriers=%d", carriers), func(t *testing.T) {
			s := newSched(t, Options{Carriers: carriers})
			parent := goOrFatal(t, s, func(ctx context.Context) error {
				var err error
				pprof.Do(ctx, pprof.Labels("role", "parent"), func(ctx context.Context) {
					mine := profLabel()
					for i := range 100 {
						child, gerr := s.Go(func(cctx context.Context) error {
							if got := profLabel(); got != mine {
								return fmt.Errorf("child %d started with labels %s, want the parent's %s", i, labelsOf(got), labelsOf(mine))
							}
							pprof.SetGoroutineLabels(pprof.WithLabels(cctx, pprof.Labels("role", "child")))
							if i%2 == 0 {
								Yield()
							}
							return nil
						})
						if gerr != nil {
							err = gerr
							return
						}
						if i%3 == 0 {
							Yield() // let another carrier take it, sometimes
						}
						if err = child.Join(); err != nil {
							return
						}
						if got := profLabel(); got != mine {
							err = fmt.Errorf("after joining child %d the parent has labels %s, want its own %s", i, labelsOf(got), labelsOf(mine))
							return
						}
					}
				})
				return err
			})
			if err := parent.Join(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLabelsAfterGoexit: a labelled virtual thread that calls
// runtime.Goexit ends the carrier's goroutine, and the replacement must
// start with the carrier's labels, not the thread's.
func TestLabelsAfterGoexit(t *testing.T) {
	s := newSched(t, Options{Carriers: 1})
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("dying", "yes")))
		runtime.Goexit()
		return nil
	})
	// Join may run it on this goroutine: its Goexit would end the test.
	if err := vt.Wait(context.Background()); err == nil {
		t.Fatal("Wait for a thread that called runtime.Goexit returned nil")
	}
	for i := range 3 {
		after := goOrFatal(t, s, func(context.Context) error {
			if got := profLabel(); got != nil {
				return fmt.Errorf("a thread run after the Goexit has labels %s", labelsOf(got))
			}
			return nil
		})
		if err := after.Join(); err != nil {
			t.Fatalf("thread %d: %v", i, err)
		}
	}
	// The carrier's own goroutine, idle now, shows them in a profile
	// if it kept them.
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	if strings.Contains(buf.String(), `"dying":"yes"`) {
		t.Errorf("a goroutine still has the ended thread's labels:\n%s", buf.String())
	}
}

// TestLabelsOfCompensationCarrier: a compensation carrier's own labels
// are the scheduler's, like every carrier's. It is started by the
// virtual thread that blocks its carrier pinned, on that goroutine, and
// a go statement gives the new goroutine the labels in place then: that
// thread's, which the compensation carrier kept as its own, and had
// while idle and between the threads it ran, and in every profile.
func TestLabelsOfCompensationCarrier(t *testing.T) {
	defer pprof.SetGoroutineLabels(context.Background())
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("sched", "owner")))
	s := newSched(t, Options{Carriers: 1})
	schedLabels := profLabel()
	pprof.SetGoroutineLabels(context.Background())
	idleTemp := make(chan unsafe.Pointer, 1)
	hook := func(c *carrier) {
		if c.temp {
			select {
			case idleTemp <- profLabel():
			default:
			}
		}
	}
	testHooks.sleepBeforeIdle.Store(&hook)
	defer testHooks.sleepBeforeIdle.Store(nil)
	pinned := goOrFatal(t, s, func(ctx context.Context) error {
		pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("req", "pinned")))
		pinning.Do(Park) // blocks the carrier: a compensation carrier starts
		return nil
	})
	var got unsafe.Pointer
	select {
	case got = <-idleTemp:
	case <-time.After(waitTimeout):
		t.Fatal("no compensation carrier went idle")
	}
	pinned.Unpark()
	if err := joinWithin(t, pinned); err != nil {
		t.Fatal(err)
	}
	if got != schedLabels {
		t.Errorf("an idle compensation carrier has labels %s, want the scheduler's %s", labelsOf(got), labelsOf(schedLabels))
	}
}

// TestLabelsNestedChildEndsJoiner: a child run nested in its joiner's
// Join that ends the goroutine's run (a runtime.Goexit, or a panic that
// OnPanic raises) unwinds into the joiner, whose deferred calls must run
// with the joiner's labels, not the child's (run, which puts them back
// after a child that returns, is unwound past).
func TestLabelsNestedChildEndsJoiner(t *testing.T) {
	for _, end := range []string{"goexit", "panic"} {
		t.Run(end, func(t *testing.T) {
			s := newSched(t, Options{Carriers: 1, OnPanic: func(_ *VThread, v any) {
				if v == "child" {
					panic("again") // unwinds into the joiner
				}
			}})
			if !s.nest {
				t.Skip("nothing runs nested on this backend")
			}
			var mine unsafe.Pointer
			deferred := make(chan unsafe.Pointer, 1)
			parent := goOrFatal(t, s, func(ctx context.Context) error {
				pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("role", "joiner")))
				mine = profLabel()
				defer func() { deferred <- profLabel() }()
				child, err := s.Go(func(cctx context.Context) error {
					pprof.SetGoroutineLabels(pprof.WithLabels(cctx, pprof.Labels("role", "child")))
					if end == "goexit" {
						runtime.Goexit()
					}
					panic("child")
				})
				if err != nil {
					return err
				}
				child.Join()
				return errors.New("the child did not run nested: Join returned")
			})
			err := joinWithin(t, parent)
			if end == "goexit" && !errors.Is(err, ErrGoexit) {
				t.Fatalf("the joiner's Join = %v, want ErrGoexit", err)
			}
			var pe *PanicError
			if end == "panic" && (!errors.As(err, &pe) || pe.Value != "again") {
				t.Fatalf("the joiner's Join = %v, want OnPanic's panic", err)
			}
			if got := <-deferred; got != mine {
				t.Errorf("the joiner's deferred call ran with labels %s, want its own %s", labelsOf(got), labelsOf(mine))
			}
		})
	}
}

// TestLabelsOfContinuationInThread: a generator (continuation.Pull) that a
// virtual thread pulls from has labels of its own, inside the thread's:
// the thread keeps its labels at every value, across parks that move it
// between carriers, while the generator keeps the labels it set, and
// neither leaks to the other or to the carriers. The thread's continuation
// leaves labels to the carrier (weft.Cont.LeaveLabels); the generator's,
// nested in it, carries its own.
func TestLabelsOfContinuationInThread(t *testing.T) {
	for _, stats := range []bool{false, true} {
		t.Run(fmt.Sprintf("contStats=%v", stats), func(t *testing.T) {
			opts := Options{Carriers: 2}
			if stats {
				opts = WithContStats(opts)
			}
			s := newSched(t, opts)
			var failures atomic.Int32
			fail := func(format string, args ...any) {
				failures.Add(1)
				t.Errorf(format, args...)
			}
			vt := goOrFatal(t, s, func(ctx context.Context) error {
				pprof.Do(ctx, pprof.Labels("thread", "puller"), func(context.Context) {
					mine := profLabel()
					var gen unsafe.Pointer
					next, stop := continuation.Pull(func(yield func(int) bool) {
						pprof.Do(context.Background(), pprof.Labels("gen", "numbers"), func(context.Context) {
							gen = profLabel()
							for i := 0; yield(i); i++ {
								if got := profLabel(); got != gen {
									fail("the generator after value %d has labels %s, want its own %s", i, labelsOf(got), labelsOf(gen))
								}
							}
						})
					})
					defer stop()
					for i := range 50 {
						if v, ok := next(); !ok || v != i {
							fail("next() = %d, %v; want %d, true", v, ok, i)
							return
						}
						if got := profLabel(); got != mine {
							fail("the thread after value %d has labels %s, want its own %s", i, labelsOf(got), labelsOf(mine))
							return
						}
						Yield()
						if i%10 == 0 {
							runtime.GC()
						}
					}
				})
				return nil
			})
			if err := vt.Join(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLabelsGeneratorParksThread: a generator with labels of its own,
// pulled by a virtual thread with others, parks the thread from inside its
// body (Yield, a yield to the thread's scope, enclosing the generator's):
// both are frozen, and resumed on whichever carrier takes the thread next,
// where the generator finds its labels, the thread its own after each
// value, and other threads theirs.
func TestLabelsGeneratorParksThread(t *testing.T) {
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
