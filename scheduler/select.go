package scheduler

import (
	"context"
	"math/rand/v2"
	"time"
)

// A select locks all its channels in the order of their ids, each
// channel's lock once. So two selects over the same channels cannot
// deadlock. It looks for a ready case, in a random order. If none is
// ready, it queues its nodes, unlocks, and waits. When woken or timed
// out, it locks its channels again and removes its remaining nodes. A
// single Send or Recv takes only its channel's lock. A completing party
// takes only the lock of the channel it operates on; waking a waiter
// takes no channel lock. So lock order is never violated.

// chanLocker is the part of a channel the select needs whatever its
// element type.
type chanLocker interface {
	chanID() uint64
	lock()
	unlock()
}

// chanID returns c's id, numbering c on the first call. NewChan does
// not number it, so a zero Chan, an unbuffered channel too, gets its own.
// A select would lock two channels with one id only once.
func (c *Chan[T]) chanID() uint64 {
	if id := c.id.Load(); id != 0 {
		return id
	}
	c.id.CompareAndSwap(0, chanIDs.Add(1))
	return c.id.Load()
}

func (c *Chan[T]) lock() { c.mu.Lock() }

func (c *Chan[T]) unlock() { c.mu.Unlock() }

// selectOp is one case of a select.
type selectOp interface {
	channel() chanLocker
	isSend() bool
	// poll completes the case if it needs no waiting. ok is a receive's
	// ok, or false for a send on a closed channel. Called with the
	// channel locked.
	poll() (done, ok bool)
	// enqueue queues a node for the case. Called with the channel locked.
	enqueue(w *waiter, index int) selNode
}

// selNode is a queued case of a select.
type selNode interface {
	// unlink takes the node off its queue if it is still on one. Called
	// with its channel locked.
	unlink()
	// complete finishes the case that won. It stores the received value,
	// or panics for a send on a channel that was closed.
	complete() (ok bool)
}

// A Case is one case of a Select: a receive made by RecvCase or a send
// made by SendCase. A Case may be reused, and used by several selects at
// once. The zero Case, and a case on a nil *Chan, is never ready.
type Case struct {
	op selectOp
}

// RecvCase returns a case that receives from c into *dst. dst may be nil
// to discard the value. When it is chosen, Select's recvOK is false if c
// is closed and drained, and *dst is then set to the zero value.
func RecvCase[T any](c *Chan[T], dst *T) Case {
	if c == nil {
		return Case{}
	}
	return Case{&recvOp[T]{c: c, dst: dst}}
}

// SendCase returns a case that sends v on c. A select that chooses a send
// on a closed channel panics, as a Send does.
func SendCase[T any](c *Chan[T], v T) Case {
	if c == nil {
		return Case{}
	}
	return Case{&sendOp[T]{c: c, v: v}}
}

type recvOp[T any] struct {
	c   *Chan[T]
	dst *T
}

func (o *recvOp[T]) channel() chanLocker { return o.c }

func (o *recvOp[T]) isSend() bool { return false }

func (o *recvOp[T]) poll() (done, ok bool) {
	v, ok, done := o.c.recvLocked()
	if done && o.dst != nil {
		*o.dst = v
	}
	return done, ok
}

func (o *recvOp[T]) enqueue(w *waiter, index int) selNode {
	n := &chanNode[T]{w: w, index: index, dst: o.dst}
	o.c.recvq.push(n)
	return n
}

type sendOp[T any] struct {
	c *Chan[T]
	v T
}

func (o *sendOp[T]) channel() chanLocker { return o.c }

func (o *sendOp[T]) isSend() bool { return true }

func (o *sendOp[T]) poll() (done, ok bool) {
	if o.c.closed {
		return true, false
	}
	return o.c.sendLocked(o.v), true
}

func (o *sendOp[T]) enqueue(w *waiter, index int) selNode {
	n := &chanNode[T]{w: w, val: o.v, send: true, index: index}
	o.c.sendq.push(n)
	return n
}

func (n *chanNode[T]) unlink() {
	if n.q != nil {
		n.q.remove(n)
	}
}

func (n *chanNode[T]) complete() bool {
	if n.send {
		if !n.ok {
			panic(errSendClosed)
		}
		return true
	}
	if n.dst != nil {
		*n.dst = n.val
	}
	return n.ok
}

// Select waits until one of the cases can proceed, performs it, and
// returns its index in cases, and for a receive whether a value was
// received (false: the channel is closed and drained; for a send, recvOK
// is true). If several cases are ready, it picks one at random (with the
// scheduler's seeded generator in deterministic mode). With no case that
// can ever be ready, it waits forever, like an empty Go select.
func Select(cases ...Case) (index int, recvOK bool) {
	index, recvOK, _ = doSelect(cases, true, nil, -1)
	return index, recvOK
}

// TrySelect is Select with a default: it returns index -1 at once if no
// case is ready.
func TrySelect(cases ...Case) (index int, recvOK bool) {
	index, recvOK, _ = doSelect(cases, false, nil, -1)
	return index, recvOK
}

// SelectTimeout is Select that gives up after d (by the scheduler's clock
// in a virtual thread), returning index -1. d <= 0 is TrySelect.
func SelectTimeout(d time.Duration, cases ...Case) (index int, recvOK bool) {
	index, recvOK, _ = doSelect(cases, d > 0, nil, d)
	return index, recvOK
}

// SelectContext is Select that gives up when ctx ends, returning index -1
// and ctx.Err(). A case that is ready is chosen even if ctx has ended
// already, as with SendContext.
// A nil ctx panics.
func SelectContext(ctx context.Context, cases ...Case) (index int, recvOK bool, err error) {
	if ctx == nil {
		nilContext("SelectContext")
	}
	index, recvOK, fired := doSelect(cases, true, ctx, -1)
	if !fired {
		return -1, false, ctx.Err()
	}
	return index, recvOK, nil
}

// selectSmall is the number of cases a select handles without allocating
// its bookkeeping.
const selectSmall = 8

func doSelect(cases []Case, block bool, ctx context.Context, d time.Duration) (int, bool, bool) {
	var orderBuf [selectSmall]int
	var lockBuf [selectSmall]chanLocker
	order, locks := orderBuf[:0], lockBuf[:0]
	for i, cs := range cases {
		if cs.op == nil {
			continue
		}
		order = append(order, i)
		locks = append(locks, cs.op.channel())
	}
	// Poll in a random order: the first ready case found is a uniformly
	// random one of the ready cases.
	vt := Current()
	for k := len(order) - 1; k > 0; k-- {
		j := randN(vt, k+1)
		order[k], order[j] = order[j], order[k]
	}
	locks = sortLocks(locks)

	lockAll(locks)
	for _, i := range order {
		if done, ok := cases[i].op.poll(); done {
			unlockAll(locks)
			if !ok && cases[i].op.isSend() {
				panic(errSendClosed)
			}
			return i, ok, true
		}
	}
	if !block {
		unlockAll(locks)
		return -1, false, false
	}
	w := newWaiter()
	var nodeBuf [selectSmall]selNode
	nodes := nodeBuf[:0]
	for _, i := range order {
		nodes = append(nodes, cases[i].op.enqueue(w, i))
	}
	unlockAll(locks)

	woken := await(w, ctx, d)

	lockAll(locks)
	for _, n := range nodes {
		n.unlink()
	}
	unlockAll(locks)
	if !woken {
		return -1, false, false
	}
	i := w.index
	for k, j := range order {
		if j == i {
			return i, nodes[k].complete(), true
		}
	}
	panic("scheduler: select woken by an unknown case")
}

// sortLocks sorts channels by id and drops repeats.
func sortLocks(ls []chanLocker) []chanLocker {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].chanID() < ls[j-1].chanID(); j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
	out := ls[:0]
	for _, l := range ls {
		if len(out) == 0 || l.chanID() != out[len(out)-1].chanID() {
			out = append(out, l)
		}
	}
	return out
}

func lockAll(ls []chanLocker) {
	for _, l := range ls {
		l.lock()
	}
}

func unlockAll(ls []chanLocker) {
	for i := len(ls) - 1; i >= 0; i-- {
		ls[i].unlock()
	}
}

// randN returns a random int in [0, n): from the scheduler's seeded
// generator for a virtual thread of a deterministic scheduler, so that
// its selects choose reproducibly.
func randN(vt *VThread, n int) int {
	if vt != nil {
		if d := vt.s.det; d != nil {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.rng.IntN(n)
		}
	}
	return rand.IntN(n)
}
