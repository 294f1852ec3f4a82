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
// backend can run here: the runtime layout mirrors describe this runtime
// (rt.Verify), and a probe continuation survives freezing and thawing on
// other goroutines with its locals, its heap pointers and a pointer to its
// own stack intact.
func stackCopyCheck() error {
	if err := rt.Verify(); err != nil {
		return err
	}
	if err := checkOpenCodedDefers(); err != nil {
		return err
	}
	if err := probeRoundTrip(); err != nil {
		return fmt.Errorf("the stack-copying probe failed: %w", err)
	}
	if err := probeYield(); err != nil {
		return fmt.Errorf("the stack-copying probe through Run and Yield failed: %w", err)
	}
	return nil
}

// checkOpenCodedDefers makes sure this package's deferred calls are
// open-coded. Built with -N (optimisations off, as debuggers build), every
// defer gets a runtime record instead; the record of (*Cont).mounted's
// frame would then pin every yield to an enclosing scope (DeferRecord),
// because that frame lies in the enclosing continuation's region. It looks
// at deferShape, compiled with the same flags as mounted (naming mounted
// here would make an initialization cycle).
func checkOpenCodedDefers() error {
	pc := reflect.ValueOf(deferShape).Pointer()
	f := rt.FindFunc(pc)
	if !f.Valid() || !strings.HasSuffix(f.Name(), ".deferShape") {
		return fmt.Errorf("the probe function deferShape was not found at %#x (found %q)", pc, f.Name())
	}
	if f.FuncData(rt.FUNCDATAOpenCodedDeferInfo) == nil {
		return errors.New("weft was built with optimisations off (-gcflags=-N): its deferred calls have runtime records, which would pin every nested yield")
	}
	return nil
}

// deferShape defers a call the way (*Cont).mounted does.
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

// probeFrames recurses depth frames, each with a local, a pointer to that
// local and a heap object, yields at the bottom, and checks them all.
//
//go:noinline
func probeFrames(c *scCont, depth, yields int) (int, error) {
	local := depth*31 + 7
	p := &local
	h := &probeNode{v: depth}
	sum := 0
	if depth == 0 {
		for i := 0; i < yields; i++ {
			if !scYield(c) {
				return 0, c.refusal()
			}
			*p += i
		}
		sum = local
	} else {
		s, err := probeFrames(c, depth-1, yields)
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

func probeRoundTrip() error {
	const depth, yields = 3, 3
	var (
		c   scCont
		sum int
		err error
	)
	c.body = func() { sum, err = probeFrames(&c, depth, yields) }
	c.run() // runs to the first yield on this goroutine
	for i := 0; !c.done; i++ {
		if i > yields || c.refusal() != nil {
			return fmt.Errorf("the probe did not suspend and resume as expected (%v)", c.refusal())
		}
		done := make(chan struct{})
		go func() { // thaw on another goroutine
			defer close(done)
			c.run()
		}()
		<-done
	}
	if err != nil {
		return err
	}
	want := 0 + 1 + 2 + 7 // the bottom frame's local after the yields
	for d := 1; d <= depth; d++ {
		want += d*31 + 7
	}
	if sum != want {
		return fmt.Errorf("the probe computed %d after thawing, want %d", sum, want)
	}
	return nil
}

// probeYieldFrames is probeFrames for probeYield: it yields through Yield,
// as a body does, and checks what Yield returns.
//
//go:noinline
func probeYieldFrames(s *scope.Scope, c **Cont, depth, yields int) (int, error) {
	local := depth*31 + 7
	p := &local
	h := &probeNode{v: depth}
	sum := 0
	if depth == 0 {
		for i := 0; i < yields; i++ {
			got, perr := Yield(s)
			if perr != nil {
				return 0, perr
			}
			if got != *c {
				return 0, fmt.Errorf("Yield returned %p, want the probe's continuation %p", got, *c)
			}
			*p += i
		}
		sum = local
	} else {
		s, err := probeYieldFrames(s, c, depth-1, yields)
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

// probeYield is probeRoundTrip through the engine's public path: a Cont
// run by Run and suspended by Yield, whose capture leaves Yield's own
// frame out and whose resume makes Yield's results in its caller's frame
// (yieldReturn), each time on a new goroutine. It runs the stack-copying
// engine whatever useStackCopy says (the backend is being chosen), and
// reports a panic as a failure.
func probeYield() (err error) {
	saved := useStackCopy
	useStackCopy = true
	defer func() {
		useStackCopy = saved
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	const depth, yields = 3, 3
	s := scope.New("weft-probe")
	var (
		c    *Cont
		sum  int
		ferr error
	)
	c = NewUncountedCont(s, func() { sum, ferr = probeYieldFrames(s, &c, depth, yields) })
	c.Run(nil) // runs to the first yield on this goroutine
	for i := 0; !c.IsDone(); i++ {
		if i > yields {
			return errors.New("the probe did not finish after its yields")
		}
		var perr any
		done := make(chan struct{})
		go func() { // thaw on another goroutine
			defer close(done)
			defer func() { perr = recover() }()
			c.Run(nil)
		}()
		<-done
		if perr != nil {
			return fmt.Errorf("panic on a resume: %v", perr)
		}
	}
	if ferr != nil {
		return ferr
	}
	want := 0 + 1 + 2 + 7 // the bottom frame's local after the yields
	for d := 1; d <= depth; d++ {
		want += d*31 + 7
	}
	if sum != want {
		return fmt.Errorf("the probe computed %d after thawing, want %d", sum, want)
	}
	return nil
}
