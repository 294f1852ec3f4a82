package continuation_test

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// panicStackDeep recurses d frames, each with a deferred call pending,
// yields to s, and then panics in panicStackLeaf: on the stack-copying
// backend the resume thaws only the innermost frames, so the panic
// reaches frames still frozen with deferred calls pending, and the return
// barrier raises it again there (docs/design.md).
//
//go:noinline
func panicStackDeep(s *scope.Scope, d int) {
	if d == 0 {
		continuation.Yield(s)
		panicStackLeaf()
	}
	defer func() { _ = d }()
	panicStackDeep(s, d-1)
}

//go:noinline
func panicStackLeaf() { panic(errors.New("deep panic")) }

// TestPanicStackFromRunCaller: the goroutine (or body) that called
// Run and recovers a panic that ended the body learns where it began,
// from its own stack or, where that lacks the frames, from PanicStack
// (docs/api.md: "nil where the deferred call's own stack already shows
// them"; ExampleContinuation_PanicStack is the pattern), on both backends.
// On the stack-copying backend a panic raised again at the return barrier
// reaches Run's caller without the frames where it began, so PanicStack
// must answer there: the body's record of them outlives its end.
func TestPanicStackFromRunCaller(t *testing.T) {
	const site = "continuation_test.panicStackLeaf("
	// where reports whether the deferred call that recovered r from c's
	// Run can tell where r began.
	where := func(c *continuation.Continuation, r any) (string, bool) {
		if st := c.PanicStack(r); st != nil {
			return "PanicStack", strings.Contains(string(st), site)
		}
		return "debug.Stack", strings.Contains(string(debug.Stack()), site)
	}
	t.Run("goroutine", func(t *testing.T) {
		s := scope.New("panicstack")
		c := continuation.New(s, func() { panicStackDeep(s, 64) })
		c.Run()
		func() {
			defer func() {
				r := recover()
				if from, ok := where(c, r); !ok {
					t.Errorf("recovered %v; %s does not name %s", r, from, site)
				}
			}()
			c.Run()
		}()
	})
	t.Run("nested", func(t *testing.T) {
		s, si := scope.New("panicstack-outer"), scope.New("panicstack-inner")
		var problem string
		c := continuation.New(s, func() {
			d := continuation.New(si, func() { panicStackDeep(si, 64) })
			d.Run()
			defer func() {
				r := recover()
				if from, ok := where(d, r); !ok {
					problem = fmt.Sprintf("recovered %v; %s does not name %s", r, from, site)
				}
			}()
			d.Run()
		})
		c.Run()
		if problem != "" {
			t.Error(problem)
		}
	})
}
