package scheduler_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scheduler"
)

//go:noinline
func gxVTDeep(d int, log *[]string) {
	var pad [32]uintptr
	pad[d%32] = uintptr(d)
	if d == 0 {
		defer func() { panic("vt deferred panic") }()
		runtime.Goexit()
	}
	if d%10 == 0 {
		defer func() { *log = append(*log, "deferred at level") }()
	}
	for range 3 {
		scheduler.Yield()
	}
	gxVTDeep(d-1, log)
	_ = pad[d%32]
}

func TestVThreadGoexitDeferredPanic(t *testing.T) {
	for _, parks := range []int{0, 1, 3} {
		for _, deep := range []int{0, 25} {
			var log []string
			var onPanic any
			s, err := scheduler.New(scheduler.Options{Carriers: 1, OnPanic: func(vt *scheduler.VThread, r any) { onPanic = r }})
			if err != nil {
				t.Fatal(err)
			}
			vt, err := s.Go(func(context.Context) error {
				defer func() { log = append(log, "fn deferred") }()
				for range parks {
					scheduler.Yield()
				}
				if deep > 0 {
					gxVTDeep(deep, &log)
				}
				defer func() { panic("vt deferred panic") }()
				runtime.Goexit()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			jerr := vt.Wait(context.Background()) // Join may run it here: its Goexit would end the test
			var pe *scheduler.PanicError
			ok := errors.As(jerr, &pe)
			t.Logf("parks=%d deep=%d: Join=%v onPanic=%v log=%v", parks, deep, jerr, onPanic, log)
			if !ok || pe.Value != "vt deferred panic" {
				t.Errorf("parks=%d deep=%d: Join returned %v, want a PanicError for the deferred panic", parks, deep, jerr)
			} else if !strings.Contains(string(pe.Stack), "goexitpanic_test.go") {
				t.Errorf("parks=%d deep=%d: PanicError.Stack does not show where the panic began:\n%s", parks, deep, pe.Stack)
			}
			s.Shutdown(context.Background())
		}
	}
}

// The Goexit's deferred call drains a generator
// (a nested continuation, resumed once before) that panics.
func TestVThreadGoexitDeferredPanicInGenerator(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	var log []string
	vt, _ := s.Go(func(context.Context) error {
		defer func() { log = append(log, "fn deferred") }()
		next, stop := continuation.Pull(func(yield func(int) bool) {
			yield(1)
			panic("generator panic")
		})
		defer stop()
		next() // the generator yields once: its next resume has a host frame
		for range 3 {
			scheduler.Yield()
		}
		defer func() { next() }()
		runtime.Goexit()
		return nil
	})
	jerr := vt.Wait(context.Background()) // Join may run it here: its Goexit would end the test
	t.Logf("%s: Join=%v log=%v", continuation.Backend(), jerr, log)
	var pe *scheduler.PanicError
	if !errors.As(jerr, &pe) || pe.Value != "generator panic" || len(log) != 1 {
		t.Errorf("Join returned %v, log %v; want a PanicError for the generator's panic, and fn's deferred call run", jerr, log)
	}
}

//go:noinline
func gxVTDeepRecovered(d int) {
	var pad [32]uintptr
	pad[d%32] = uintptr(d)
	if d == 0 {
		for range 3 {
			scheduler.Yield()
		}
		defer func() { panic("vt deferred panic") }()
		runtime.Goexit()
	}
	gxVTDeepRecovered(d - 1)
	_ = pad[d%32]
}

// A frozen frame of the virtual thread recovers the panic raised during
// Goexit: the Goexit goes on, and Join reports ErrGoexit.
func TestVThreadGoexitDeferredPanicRecovered(t *testing.T) {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	var log []string
	vt, _ := s.Go(func(context.Context) error {
		defer func() { log = append(log, "fn recovered "+recover().(string)) }()
		for range 3 {
			scheduler.Yield()
		}
		gxVTDeepRecovered(25)
		log = append(log, "fn returned")
		return nil
	})
	jerr := vt.Wait(context.Background()) // Join may run it here: its Goexit would end the test
	t.Logf("%s: Join=%v log=%v", continuation.Backend(), jerr, log)
	if jerr != scheduler.ErrGoexit || len(log) != 1 {
		t.Errorf("Join returned %v, log %v; want ErrGoexit and the recovery logged", jerr, log)
	}
}
