package scheduler

import (
	"context"
	"time"
	"unsafe"
)

// Context returns the virtual thread's context, the one its function
// gets.
func (vt *VThread) Context() context.Context {
	if vt == nil {
		nilVThread("Context")
	}
	return &vt.ctx
}

// vtContext is a virtual thread's context: its parent's (the scheduler's,
// or its group's) deadline, cancellation and values, and the virtual
// thread itself under vthreadKey. It lives in the VThread, so starting a
// virtual thread allocates no context and registers nothing with the
// parent: the parent's cancellation is the virtual thread's. It has no
// field: the parent is found from the VThread (parent), which saves the
// VThread an interface's two words, and a spawn their store.
type vtContext struct{}

// vt returns the VThread c is the ctx field of.
func (c *vtContext) vt() *VThread {
	return (*VThread)(unsafe.Add(unsafe.Pointer(c), -int(unsafe.Offsetof(VThread{}.ctx))))
}

// parent returns the context c derives from: the group's, for a child of
// a Group, or the scheduler's. Neither changes once made.
func (c *vtContext) parent() context.Context {
	vt := c.vt()
	if g := vt.group; g != nil {
		return g.ctx
	}
	return vt.s.ctx
}

type vthreadKey struct{}

func (c *vtContext) Deadline() (deadline time.Time, ok bool) { return c.parent().Deadline() }

func (c *vtContext) Done() <-chan struct{} { return c.parent().Done() }

func (c *vtContext) Err() error { return c.parent().Err() }

func (c *vtContext) Value(key any) any {
	if key == (vthreadKey{}) {
		return c.vt()
	}
	return c.parent().Value(key)
}

func (c *vtContext) String() string { return c.vt().String() + " context" }

// FromContext returns the virtual thread whose context ctx is or derives
// from, or nil.
func FromContext(ctx context.Context) *VThread {
	vt, _ := ctx.Value(vthreadKey{}).(*VThread)
	return vt
}

// nilContext panics for a call of fn with a nil context.Context, which
// the context package forbids.
//
//go:noinline
func nilContext(fn string) {
	panic("scheduler: " + fn + " with a nil Context (pass context.Background() or context.TODO() for none)")
}
