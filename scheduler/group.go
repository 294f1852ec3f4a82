package scheduler

import (
	"context"
	"sync"
)

// A Group runs child virtual threads as one task, with errgroup semantics:
// Wait waits for all of them, and the first child to fail (return an error
// or panic) cancels the group's context, which every child's context
// derives from, so the others can stop early. Create one with NewGroup.
type Group struct {
	s      *Scheduler
	ctx    context.Context
	cancel context.CancelCauseFunc
	// unwatch stops the watch that cancels ctx with the scheduler's
	// context.
	unwatch func() bool

	mu       sync.Mutex
	children []*VThread
	err      error
}

// NewGroup returns a group of virtual threads on s whose context derives
// from ctx, and that context. The group's context is also cancelled with
// the contexts of s's other virtual threads: by Close, by Shutdown (when
// its context ends first, or once it has drained), and when
// Options.Context ends. Wait releases what ties the two together, so a
// group must be waited for.
func (s *Scheduler) NewGroup(ctx context.Context) (*Group, context.Context) {
	gctx, cancel := context.WithCancelCause(ctx)
	unwatch := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	if s.ctx.Err() != nil {
		cancel(context.Cause(s.ctx)) // at once, not in AfterFunc's goroutine
	}
	return &Group{s: s, ctx: gctx, cancel: cancel, unwatch: unwatch}, gctx
}

// Go starts fn in a child virtual thread whose context is the group's. It
// returns ErrClosed if the scheduler is shutting down.
func (g *Group) Go(fn func(ctx context.Context) error) error {
	vt, err := g.s.start("", g.ctx, g, fn)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.children = append(g.children, vt)
	g.mu.Unlock()
	return nil
}

// childEnded records how a child ended, before anyone can see it ended
// (Scheduler.finish): a failure is the group's, and Wait, which joins the
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
	}
	g.mu.Unlock()
	if first {
		g.cancel(err)
	}
}

// Wait waits for every child started so far, and for any they start
// meanwhile, then cancels the group's context and returns the first
// child's error (a *PanicError for a panic), or nil. Called from a virtual
// thread it parks; from a goroutine it blocks. It joins each child with
// VThread.Join, which may run a child inside the caller (see Join).
func (g *Group) Wait() error {
	for i := 0; ; i++ {
		g.mu.Lock()
		if i >= len(g.children) {
			err := g.err
			g.mu.Unlock()
			g.cancel(context.Canceled)
			g.unwatch()
			return err
		}
		vt := g.children[i]
		g.mu.Unlock()
		vt.Join()
	}
}
