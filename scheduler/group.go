package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// A Group runs child virtual threads as one task, with errgroup
// semantics. Wait waits for all of them. The first child to fail, by an
// error or a panic, cancels the group's context. Every child's context
// derives from it, so the others can stop early. Create one with
// NewGroup.
type Group struct {
	s      *Scheduler
	ctx    context.Context
	cancel context.CancelCauseFunc
	// unwatch stops the watch that cancels ctx with the scheduler's
	// context.
	unwatch func() bool

	mu sync.Mutex
	// children are the children started, in order, less some finished
	// ones. Go drops those when it would grow the array; Wait drops them
	// from the end. A long-lived group holds its live children and at
	// most about as many finished ones, not every child it ever ran.
	children []*VThread
	err      error // the first failure, the group context's cause
	// panicked is the first child panic that is not err: a child that
	// panicked after another failed. Wait reports it with err.
	panicked *PanicError
}

// NewGroup returns a group of virtual threads on s whose context derives
// from ctx, and that context. The group's context is also cancelled with
// the contexts of s's other virtual threads. Close cancels them, and so
// does Shutdown, when its context ends first or once it has drained. So
// does the end of Options.Context. Wait releases what ties the two
// together, so a group must be waited for. In deterministic mode the
// group's context ends at the carrier's first pick after the
// scheduler's has (watchContext). That is the same point of every run
// with a seed, not whenever a goroutine of context.AfterFunc's runs.
func (s *Scheduler) NewGroup(ctx context.Context) (*Group, context.Context) {
	s.check("NewGroup")
	gctx, cancel := context.WithCancelCause(ctx)
	unwatch := s.watchContext(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	if s.ctx.Err() != nil {
		cancel(context.Cause(s.ctx)) // at once, not in AfterFunc's goroutine
	}
	return &Group{s: s, ctx: gctx, cancel: cancel, unwatch: unwatch}, gctx
}

// Go starts fn in a child virtual thread whose context is the group's. It
// returns ErrClosed if the scheduler is shutting down.
func (g *Group) Go(fn func(ctx context.Context) error) error {
	g.check("Go")
	if fn == nil {
		panic("scheduler: Group.Go with a nil function")
	}
	vt, err := g.s.start("", g, fn)
	if err != nil {
		return err
	}
	g.mu.Lock()
	if len(g.children) == cap(g.children) {
		g.dropFinished()
	}
	g.children = append(g.children, vt)
	g.mu.Unlock()
	return nil
}

// check panics, for method op, if g is not one NewGroup made. A zero
// Group has no scheduler or context. errgroup.Group's zero value is
// usable, so a zero Group is easily declared.
func (g *Group) check(op string) {
	if g.s == nil {
		panic("scheduler: Group." + op + " on a zero Group; make groups with Scheduler.NewGroup")
	}
}

// dropFinished removes the finished children from g.children, keeping
// the order of the others. It clears the slots it frees. The array grows
// only when more than half of it holds live children. g.mu is held.
func (g *Group) dropFinished() {
	kept := g.children[:0]
	for _, vt := range g.children {
		if !vt.finished() {
			kept = append(kept, vt)
		}
	}
	clear(g.children[len(kept):])
	if len(kept) > cap(kept)/2 {
		// Double it now. The next scan is then at least as many starts
		// away as this one looked at: amortised O(1) per start.
		kept = slices.Grow(kept, cap(kept))
	}
	g.children = kept
}

// childEnded records how a child ended, before anyone can see it ended
// (Scheduler.finish). A failure is the group's, and Wait, which joins the
// children, returns it. A child's panic fails the group with the same
// *PanicError that its Join returns.
func (g *Group) childEnded(vt *VThread) {
	if vt.err != nil && vt.err != ErrGoexit {
		g.fail(vt.err)
	}
}

func (g *Group) fail(err error) {
	g.mu.Lock()
	first := g.err == nil
	if first {
		g.err = err
	} else if pe, ok := err.(*PanicError); ok && g.panicked == nil {
		if _, firstPanicked := g.err.(*PanicError); !firstPanicked {
			g.panicked = pe
		}
	}
	g.mu.Unlock()
	if first {
		g.cancel(err)
	}
}

// Wait waits for every child started so far, and for any they start
// meanwhile. It then cancels the group's context and returns the first
// child's error, or nil. A panic's error is a *PanicError. A child that
// panics after another has failed is not dropped. Wait then returns
// errors.Join(first error, that *PanicError): errors.As finds the panic
// and errors.Is the first error. Later panics reach only
// Options.OnPanic. As in errgroup, a child that ends by runtime.Goexit
// does not fail the group. Called from a virtual thread it parks; from a
// goroutine it blocks. It joins each child with VThread.Join, the last
// started first. So it may run a child inside the caller (see Join).
// Called from one of the group's own children, which it would wait for,
// it panics.
func (g *Group) Wait() error {
	g.check("Wait")
	if cur := Current(); cur != nil && cur.group == g {
		panic("scheduler: Group.Wait called from one of the group's own children, which it would wait for forever (wait for the group from outside it)")
	}
	for {
		g.mu.Lock()
		var vt *VThread
		for n := len(g.children); n > 0; n-- {
			if last := g.children[n-1]; !last.finished() {
				vt = last
				break
			}
			g.children[n-1] = nil
			g.children = g.children[:n-1]
		}
		if vt == nil {
			err := g.err
			if g.panicked != nil {
				err = errors.Join(err, g.panicked)
			}
			g.mu.Unlock()
			g.cancel(context.Canceled)
			g.unwatch()
			return err
		}
		g.mu.Unlock()
		vt.Join()
	}
}
