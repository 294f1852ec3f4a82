//go:build amd64 && !race && !msan && !asan

package weft

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/scope"
)

// stackCopyCheck verifies, once per process, that the stack-copying
// backend can run here. The runtime layout mirrors must describe this
// runtime (rt.Verify). A probe continuation must survive freezing and
// thawing on other goroutines with its locals, its heap pointers and a
// pointer to its own stack intact.
func stackCopyCheck() error {
	if err := rt.Verify(); err != nil {
		return err
	}
	if err := checkOpenCodedDefers(); err != nil {
		return err
	}
	if err := probe(probeRoundTrip); err != nil {
		return fmt.Errorf("the stack-copying probe failed: %w", err)
	}
	if err := probe(probeYield); err != nil {
		return fmt.Errorf("the stack-copying probe through Run and Yield failed: %w", err)
	}
	return nil
}

// checkOpenCodedDefers makes sure this package's deferred calls are
// open-coded. Built with -N (optimisations off, as debuggers build), every
// defer gets a runtime record instead, and every deferred call runs from
// runtime.deferreturn, whose frame pins a yield in it. Such a build has not
// passed the continuation tests under the stack-copying backend, so it
// runs the portable one. It looks at deferShape, compiled with the same
// flags as the engine. Naming (*Cont).mount here would make an
// initialization cycle.
func checkOpenCodedDefers() error {
	pc := reflect.ValueOf(deferShape).Pointer()
	f := rt.FindFunc(pc)
	if !f.Valid() || !strings.HasSuffix(f.Name(), ".deferShape") {
		return fmt.Errorf("the probe function deferShape was not found at %#x (found %q)", pc, f.Name())
	}
	if f.FuncData(rt.FUNCDATAOpenCodedDeferInfo) == nil {
		return errors.New("weft was built with optimisations off (-gcflags=-N): the stack-copying backend is not verified for such builds")
	}
	return nil
}

// deferShape defers a call the way (*Cont).mount does.
//
//go:noinline
func deferShape(p *int) {
	done := false
	defer func() {
		if !done {
			*p = 1
		}
	}()
	*p = 2
	done = true
}

type probeNode struct{ v int }

// The probes' continuations recurse probeDepth frames and yield
// probeYields times at the bottom.
const probeDepth, probeYields = 3, 3

// probe runs one probe and reports a panic on the calling goroutine as its
// failure.
func probe(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// probeFrames recurses depth frames, each with a local, a pointer to that
// local and a heap object, calls yield yields times at the bottom, and
// checks them all.
//
//go:noinline
func probeFrames(yield func() error, depth, yields int) (int, error) {
	local := depth*31 + 7
	p := &local
	h := &probeNode{v: depth}
	sum := 0
	if depth == 0 {
		for i := 0; i < yields; i++ {
			if err := yield(); err != nil {
				return 0, err
			}
			*p += i
		}
		sum = local
	} else {
		s, err := probeFrames(yield, depth-1, yields)
		if err != nil {
			return 0, err
		}
		sum = s + *p
	}
	if h.v != depth || *p != local {
		return 0, fmt.Errorf("frame %d came back with %d and %d", depth, h.v, *p)
	}
	return sum, nil
}

// probeCheck resumes a probe continuation that has run to its first yield,
// each time on a new goroutine, until done reports it finished, and then
// checks what probeFrames returned.
func probeCheck(resume func(), done func() bool, sum *int, err *error) error {
	for i := 0; !done(); i++ {
		if i > probeYields {
			return errors.New("the probe did not finish after its yields")
		}
		var p any
		finished := make(chan struct{})
		go func() { // thaw on another goroutine
			defer close(finished)
			defer func() { p = recover() }()
			resume()
		}()
		<-finished
		if p != nil {
			return fmt.Errorf("panic on a resume: %v", p)
		}
	}
	if *err != nil {
		return *err
	}
	want := 7 // the bottom frame's local, after the yields added 0, 1, ...
	for i := range probeYields {
		want += i
	}
	for d := 1; d <= probeDepth; d++ {
		want += d*31 + 7
	}
	if *sum != want {
		return fmt.Errorf("the probe computed %d after thawing, want %d", *sum, want)
	}
	return nil
}

// probeRoundTrip runs probeFrames in an stackState suspended by the engine's
// inner suspension, stackYield.
func probeRoundTrip() error {
	var (
		c   stackState
		sum int
		err error
	)
	yield := func() error {
		if !stackYield(&c) {
			return c.refusal()
		}
		return nil
	}
	c.body = func() { sum, err = probeFrames(yield, probeDepth, probeYields) }
	c.run() // runs to the first yield on this goroutine
	return probeCheck(c.run, func() bool { return c.done }, &sum, &err)
}

// probeYield runs probeFrames the way a user's continuation runs: a Cont
// resumed by Run and suspended by Yield. Yield's capture leaves its own
// frame out, and the resume makes Yield's results in its caller's frame.
// It runs the stack-copying engine whatever useStackCopy says, since the
// backend is being chosen. It checks that Yield returns the probe's
// continuation.
func probeYield() error {
	saved := useStackCopy
	useStackCopy = true
	defer func() { useStackCopy = saved }()
	s := scope.New("weft-probe")
	var (
		c   *Cont
		sum int
		err error
	)
	yield := func() error {
		got, perr := Yield(s)
		if perr != nil {
			return perr
		}
		if got != c {
			return fmt.Errorf("Yield returned %p, want the probe's continuation %p", got, c)
		}
		return nil
	}
	c = NewUncountedCont(s, func() { sum, err = probeFrames(yield, probeDepth, probeYields) })
	c.Run(nil) // runs to the first yield on this goroutine
	return probeCheck(func() { c.Run(nil) }, c.IsDone, &sum, &err)
}
