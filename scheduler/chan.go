package scheduler

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftrt/weft"
)

// Channels.
//
// A Chan has a ring buffer and two queues of waiting parties, senders and
// receivers, guarded by the channel's lock. Each queued party is a
// chanNode that points to a waiter. A plain Send or Recv has one node; a
// select has one node per case, all pointing to the same waiter, so the
// waiter is queued on every channel of the select at once.
//
// The waiter's state is the claim. Whoever completes an operation with a
// queued node (a matching Send or Recv, a Close) first writes the node's
// payload. It then calls wake. wake's compare-and-swap succeeds for
// exactly one party, and only if the waiter has not timed out or been
// cancelled. If it fails, the node is stale: its select has fired
// elsewhere, or its wait ended. The node is dropped from the queue and
// the next one is tried. The payload is written before the claim. So a
// waiter that sees itself woken always finds its payload in place, even
// if it wakes spuriously before the signal arrives. A stale node's
// payload is never read. The winner of a select also records which case
// won, in the waiter's index. It does so after the claim, still under
// its channel's lock. The select reads it only after locking all its
// channels again. Select and its lock order are in select.go.

// chanIDs numbers channels, for the select's lock order.
var chanIDs atomic.Uint64

// A Chan is a channel of values of type T for virtual threads and
// goroutines, with the semantics of a Go channel: FIFO, unbuffered
// (rendezvous) or buffered, closable. A virtual thread that has to wait
// parks, leaving its carrier free for other virtual threads; a plain
// goroutine blocks. Use Select to wait on several channels.
//
// Waiting senders and receivers are served in FIFO order, so values sent
// by one sender are received in the order sent. The zero Chan is an open
// unbuffered channel; NewChan makes buffered ones. Unlike a Go channel, a
// nil *Chan must not be used. Sending, receiving or closing on one
// panics with a message that says so. A nil Go channel blocks for ever,
// but a virtual thread parked for good would be a leak nobody sees. As
// in Go, a Select case of a nil *Chan is never ready, and Len and Cap
// are 0.
type Chan[T any] struct {
	id     atomic.Uint64 // the select's lock order; 0 until chanID assigns it
	mu     sync.Mutex
	buf    []T // ring of Cap() slots
	head   int // the oldest buffered value
	count  int // buffered values
	closed bool
	recvq  chanQueue[T]
	sendq  chanQueue[T]
}

// chanNode is a party queued on a channel: a blocked sender with the value
// it sends, or a blocked receiver with room for the value it gets.
type chanNode[T any] struct {
	w     *waiter // &own for a plain Send or Recv; the select's otherwise
	own   waiter
	val   T    // sender: the value sent; receiver: the value received
	ok    bool // receiver: a value came (false: closed); sender: taken (false: closed)
	send  bool
	index int // select case index; -1 for a plain Send or Recv
	dst   *T  // select receive: where the value goes

	q          *chanQueue[T] // the queue it is on, nil when off
	prev, next *chanNode[T]
}

// A chanQueue is a doubly linked list of nodes. A node on no queue has
// q, prev and next nil. It is new, or taken off by pop or remove, which
// clear them. A popped node's prev is nil already, as the head's always
// is. push relies on it and does not store a nil next again.
type chanQueue[T any] struct {
	head, tail *chanNode[T]
}

func (q *chanQueue[T]) push(n *chanNode[T]) {
	n.q = q
	n.prev = q.tail
	if q.tail == nil {
		q.head = n
	} else {
		q.tail.next = n
	}
	q.tail = n
}

// pop takes the first node off q. It is remove for a node with no prev,
// written out: it stores three pointers where remove stores five.
func (q *chanQueue[T]) pop() *chanNode[T] {
	n := q.head
	if n != nil {
		q.popHead(n)
	}
	return n
}

// popHead is pop of n, q's first node, for a caller that has loaded it.
// sendWait and recvWait call it: their loops test the head once, and
// pop's result would be tested again.
func (q *chanQueue[T]) popHead(n *chanNode[T]) {
	next := n.next
	q.head = next
	if next == nil {
		q.tail = nil
	} else {
		next.prev = nil
		n.next = nil
	}
	n.q = nil
}

func (q *chanQueue[T]) remove(n *chanNode[T]) {
	if n.prev == nil {
		q.head = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		q.tail = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next, n.q = nil, nil, nil
}

// fire claims the node's waiter; the payload must be in place. It
// reports whether it won. If not, the node is stale, and fire drops its
// value: a receiver's payload just written, or a sender's value. Nobody
// reads it once its wait has ended elsewhere. So the caller need not
// keep the node across the call. Once fire has won, the node is its
// waiter's again, which may reuse it at once (keptNodeOf). After the
// claim nothing writes the node but its waiter. The waiter never writes
// w or index; a kept node's index is -1 from the start. The wake-up
// reads only the waiter's virtual thread or channel, which never change.
// sendWait and recvWait, on the path of every hand-off, have copies of
// it, of claimed and of unparkClaimed (TestParkCopiesMatch).
func (n *chanNode[T]) fire() bool {
	if n.w.state.CompareAndSwap(waiting, woken) {
		n.w.claimed(n.index)
		return true
	}
	var zero T
	n.val = zero
	return false
}

// sent ends a sender's wait once woken. It drops the value, taken or
// dropped by Close, so no reference is kept. It panics if the channel
// was closed instead.
func (n *chanNode[T]) sent() bool {
	var zero T
	n.val = zero
	if !n.ok {
		panic(errSendClosed)
	}
	return true
}

// received ends a receiver's wait once woken. It returns the value and
// whether one came (false: closed). The node's reference to it is
// dropped.
func (n *chanNode[T]) received() (v T, ok bool) {
	v, ok = n.val, n.ok
	var zero T
	n.val = zero
	return v, ok
}

// plainNode returns a new node for a blocking send or receive with a
// timeout or a context, with its waiter ready. Send and Recv have
// neither, and reuse a kept node (sendWait).
func plainNode[T any]() *chanNode[T] {
	n := &chanNode[T]{index: -1}
	n.w = &n.own
	n.own.init()
	return n
}

// A blocking Send or Recv, without a timeout or context, waits on a
// node. sendWait and recvWait find it with keptNodeOf, or make it with
// newWaitNode, and set its waiter's state waiting. A virtual thread
// reuses the node of its last such operation on a channel of the same T.
// Only the operation's completer can wake it: no timer or context fires
// late into its next use. The completer is done with the node once it
// has claimed it.

// keptNodeOf returns the node vt keeps, if vt is a virtual thread that
// keeps one for T; nil otherwise.
func keptNodeOf[T any](vt *VThread) *chanNode[T] {
	if vt != nil {
		if p := vt.node; p != nil {
			// (not &&: inlined, it compiles to a flag and its test)
			if *(*unsafe.Pointer)(p) == nodeType[T]() {
				return &(*keptNode[T])(p).chanNode
			}
		}
	}
	return nil
}

// newWaitNode makes the node of a Send or Recv that waits, for a
// goroutine (vt nil) or for a virtual thread that keeps none for T. The
// virtual thread keeps it. It is not inlined, so it adds nothing to
// sendWait's and recvWait's frames.
//
//go:noinline
func newWaitNode[T any](vt *VThread) *chanNode[T] {
	if vt == nil {
		n := &chanNode[T]{index: -1}
		n.w = &n.own
		n.own.ch = make(chan struct{}, 1)
		return n
	}
	k := &keptNode[T]{typ: nodeType[T]()}
	n := &k.chanNode
	n.w = &n.own
	n.own.vt = vt
	n.index = -1
	vt.node = unsafe.Pointer(k)
	return n
}

// keptNode is the node a virtual thread keeps (VThread.node) for its
// next blocking Send or Recv. It is a chanNode[T] after the word that
// says which T. So the VThread holds one pointer, not an interface.
// Every parked virtual thread has a VThread.
type keptNode[T any] struct {
	typ unsafe.Pointer // nodeType[T]()
	chanNode[T]
}

// nodeType returns a word that differs for each T: the type word of a
// *chanNode[T] in an interface. The runtime's eface is type, then data.
func nodeType[T any]() unsafe.Pointer {
	x := any((*chanNode[T])(nil))
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&x))[0]
}

// NewChan returns a channel with room for capacity buffered values. 0
// makes an unbuffered channel, on which a send waits for a receiver.
// A negative capacity panics, as make does.
func NewChan[T any](capacity int) *Chan[T] {
	if capacity < 0 {
		panic("scheduler: NewChan with a negative capacity")
	}
	return &Chan[T]{buf: make([]T, capacity)}
}

// Cap returns the channel's buffer capacity: 0 for a nil *Chan, as cap
// of a nil Go channel is.
func (c *Chan[T]) Cap() int {
	if c == nil {
		return 0
	}
	return len(c.buf)
}

// Len returns the number of values buffered in the channel: 0 for a nil
// *Chan, as len of a nil Go channel is.
func (c *Chan[T]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

const (
	errSendClosed  = "scheduler: send on closed Chan"
	errCloseClosed = "scheduler: close of closed Chan"
	errNilSend     = "scheduler: send on a nil *Chan" + nilChanHint
	errNilRecv     = "scheduler: receive on a nil *Chan" + nilChanHint
	errNilClose    = "scheduler: close of a nil *Chan" + nilChanHint
	nilChanHint    = " (make one with NewChan or new(Chan[T]); a Select case of a nil *Chan, never ready, turns the case off)"
)

// Send sends v, waiting until a receiver takes it or there is room in the
// buffer. It panics if the channel is closed, or is closed while Send
// waits.
func (c *Chan[T]) Send(v T) { c.sendWait(v) }

// TrySend sends v if that needs no waiting, and reports whether it did. It
// panics if the channel is closed.
func (c *Chan[T]) TrySend(v T) bool { return c.send(v, false, nil, -1) }

// SendTimeout is Send that gives up after d, by the scheduler's clock in
// a virtual thread. It reports whether v was sent. d <= 0 is TrySend.
func (c *Chan[T]) SendTimeout(v T, d time.Duration) bool {
	return c.send(v, d > 0, nil, d)
}

// SendContext is Send that gives up when ctx ends, returning ctx.Err().
// It returns nil if v was sent. A send that needs no waiting happens
// even if ctx has ended already: a try comes first. It may so happen in
// a select over ctx.Done() and a Go channel too. Check ctx.Err() first to
// rule it out. A nil ctx panics.
func (c *Chan[T]) SendContext(ctx context.Context, v T) error {
	if ctx == nil { // nil is send's "no context"
		nilContext("Chan.SendContext")
	}
	if c.send(v, true, ctx, -1) {
		return nil
	}
	return ctx.Err()
}

func (c *Chan[T]) send(v T, block bool, ctx context.Context, d time.Duration) bool {
	if c == nil {
		panic(errNilSend)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		panic(errSendClosed)
	}
	if c.sendLocked(v) {
		c.mu.Unlock()
		return true
	}
	if !block {
		c.mu.Unlock()
		return false
	}
	n := plainNode[T]()
	n.val, n.ok, n.send = v, false, true
	c.sendq.push(n)
	c.mu.Unlock()
	if await(n.w, ctx, d) {
		return n.sent()
	}
	c.mu.Lock()
	if n.q != nil {
		n.q.remove(n)
	}
	c.mu.Unlock()
	return false
}

// sendWait is Send: send for a blocking send without a timeout or
// context. It has nothing in its way that Send does not need. Its
// arguments are words in the argument area of the frame that calls it,
// and every virtual thread parked in Send freezes that frame.
func (c *Chan[T]) sendWait(v T) {
	if c == nil {
		panic(errNilSend)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		panic(errSendClosed)
	}
	// sendLocked's hand-off to a waiting receiver, without its calls. It
	// is on the completing side of every hand-off from a Send. The claim
	// and wake-up must match chanNode.fire, waiter.claimed and
	// VThread.unparkClaimed (TestParkCopiesMatch).
	for r := c.recvq.head; r != nil; r = c.recvq.head {
		c.recvq.popHead(r)
		r.val, r.ok = v, true
		if w := r.w; w.state.CompareAndSwap(waiting, woken) { // r.fire()
			if r.index >= 0 {
				w.index = r.index
			}
			if vt := w.vt; vt != nil {
				// vt.unparkClaimed()
				if vt.state.CompareAndSwap(vtParked, vtQueued) {
					vt.enqueue(nil)
				} else {
					vt.unparkOn(nil)
				}
			} else {
				w.ch <- struct{}{}
			}
			c.mu.Unlock()
			return
		}
		var zero T
		r.val = zero
	}
	if c.count < len(c.buf) {
		c.sendLocked(v) // buffers it: no receiver waits
		c.mu.Unlock()
		return
	}
	var vt *VThread // Current, with currentIn inline
	if k := weft.Innermost(); k != nil {
		vt = currentIn(k)
	}
	n := keptNodeOf[T](vt)
	if n == nil {
		n = newWaitNode[T](vt)
	}
	n.own.state.Store(waiting)
	n.val, n.ok, n.send = v, false, true
	c.sendq.push(n)
	c.mu.Unlock()
	if n.own.vt == nil {
		<-n.own.ch // a plain goroutine: only a wake sends
	} else {
		// Must match waiter.parkUntilWoken's loop with w as n.own
		// (TestParkCopiesMatch). It is a copy, so no frame of await's
		// or parkUntilWoken's is frozen and thawed under the park.
		// Only a wake ends this wait. Only n is live across the yield;
		// its waiter is n.own (newWaitNode). That is one pointer for
		// the capture to publish and the thaw to restore.
		for n.own.state.Load() == waiting {
			vt := n.own.vt
			if vt.permit.Load() { // (not &&: in a loop it compiles to a flag and its test)
				if vt.permit.CompareAndSwap(true, false) {
					continue // a wake-up for an earlier wait: look again
				}
			}
			vt.action = actPark
			if _, perr := weft.Yield(vthreadScope); perr != nil {
				parkPinned(perr)
			}
			if n.own.vt.permit.Load() {
				n.own.vt.permit.CompareAndSwap(true, false)
			}
		}
	}
	n.sent()
}

// sendLocked hands v to a waiting receiver or buffers it, and reports
// whether it did. Called with c.mu held on an open channel.
func (c *Chan[T]) sendLocked(v T) bool {
	for r := c.recvq.pop(); r != nil; r = c.recvq.pop() {
		r.val, r.ok = v, true
		if r.fire() {
			return true
		}
	}
	if c.count < len(c.buf) {
		i := c.head + c.count
		if i >= len(c.buf) {
			i -= len(c.buf)
		}
		c.buf[i] = v
		c.count++
		return true
	}
	return false
}

// All returns an iterator over the values received from c until it is
// closed and drained, as a for range loop over a Go channel receives:
//
//	for v := range ch.All() {
//		...
//	}
//
// Each step is a Recv: a virtual thread parks while it waits, a goroutine
// blocks. A loop that stops early leaves the values it did not take in c.
// A defer statement in the loop's body gives the enclosing function a
// range-over-func defer record, which the stack-copying backend cannot
// move. That pins a virtual thread's stack, so its waits
// block the carrier, as any pinned park does. Put the body in a function
// of its own to defer there.
func (c *Chan[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		for {
			v, ok := c.Recv()
			if !ok || !yield(v) {
				return
			}
		}
	}
}

// Recv receives a value, waiting until there is one. ok is false if the
// channel is closed and drained; v is then the zero value.
func (c *Chan[T]) Recv() (v T, ok bool) { return c.recvWait() }

// TryRecv receives a value if that needs no waiting. ready reports
// whether the receive happened. v and ok are then what Recv would have
// returned; ok is false if the channel is closed and drained.
func (c *Chan[T]) TryRecv() (v T, ok, ready bool) { return c.recv(false, nil, -1) }

// RecvTimeout is Recv that gives up after d, by the scheduler's clock in
// a virtual thread. ready is false if it gave up. d <= 0 is TryRecv.
func (c *Chan[T]) RecvTimeout(d time.Duration) (v T, ok, ready bool) {
	return c.recv(d > 0, nil, d)
}

// RecvContext is Recv that gives up when ctx ends, returning ctx.Err().
// A receive that needs no waiting happens even if ctx has ended already,
// as with SendContext.
// A nil ctx panics.
func (c *Chan[T]) RecvContext(ctx context.Context) (v T, ok bool, err error) {
	if ctx == nil {
		nilContext("Chan.RecvContext")
	}
	v, ok, ready := c.recv(true, ctx, -1)
	if !ready {
		return v, false, ctx.Err()
	}
	return v, ok, nil
}

func (c *Chan[T]) recv(block bool, ctx context.Context, d time.Duration) (v T, ok, ready bool) {
	if c == nil {
		panic(errNilRecv)
	}
	c.mu.Lock()
	if v, ok, ready = c.recvLocked(); ready || !block {
		c.mu.Unlock()
		return v, ok, ready
	}
	n := plainNode[T]()
	n.ok, n.send = false, false
	c.recvq.push(n)
	c.mu.Unlock()
	if await(n.w, ctx, d) {
		v, ok = n.received()
		return v, ok, true
	}
	c.mu.Lock()
	if n.q != nil {
		n.q.remove(n)
	}
	c.mu.Unlock()
	return v, false, false
}

// recvWait is Recv: recv for a blocking receive without a timeout or
// context, as sendWait is Send.
func (c *Chan[T]) recvWait() (v T, ok bool) {
	if c == nil {
		panic(errNilRecv)
	}
	c.mu.Lock()
	if c.count > 0 {
		return c.recvBuffered()
	}
	// recvLocked's hand-off from a waiting sender, without its calls. It
	// is on the completing side of every hand-off to a Recv. The claim
	// and wake-up must match chanNode.fire, waiter.claimed and
	// VThread.unparkClaimed (TestParkCopiesMatch).
	for s := c.sendq.head; s != nil; s = c.sendq.head {
		c.sendq.popHead(s)
		sv := s.val
		s.ok = true
		if w := s.w; w.state.CompareAndSwap(waiting, woken) { // s.fire()
			if s.index >= 0 {
				w.index = s.index
			}
			if vt := w.vt; vt != nil {
				// vt.unparkClaimed()
				if vt.state.CompareAndSwap(vtParked, vtQueued) {
					vt.enqueue(nil)
				} else {
					vt.unparkOn(nil)
				}
			} else {
				w.ch <- struct{}{}
			}
			c.mu.Unlock()
			return sv, true
		}
		var zero T
		s.val = zero
	}
	if c.closed {
		c.mu.Unlock()
		return v, false
	}
	var vt *VThread // Current, with currentIn inline
	if k := weft.Innermost(); k != nil {
		vt = currentIn(k)
	}
	n := keptNodeOf[T](vt)
	if n == nil {
		n = newWaitNode[T](vt)
	}
	n.own.state.Store(waiting)
	n.ok, n.send = false, false
	c.recvq.push(n)
	c.mu.Unlock()
	if n.own.vt == nil {
		<-n.own.ch // a plain goroutine: only a wake sends
	} else {
		// Must match waiter.parkUntilWoken's loop with w as n.own
		// (TestParkCopiesMatch), as in sendWait.
		for n.own.state.Load() == waiting {
			vt := n.own.vt
			if vt.permit.Load() { // (not &&: in a loop it compiles to a flag and its test)
				if vt.permit.CompareAndSwap(true, false) {
					continue // a wake-up for an earlier wait: look again
				}
			}
			vt.action = actPark
			if _, perr := weft.Yield(vthreadScope); perr != nil {
				parkPinned(perr)
			}
			if n.own.vt.permit.Load() {
				n.own.vt.permit.CompareAndSwap(true, false)
			}
		}
	}
	return n.received()
}

// recvBuffered is recvWait's receive of a buffered value: recvLocked,
// then the unlock. It is a call of its own, so its results take no room
// in recvWait's frame. A Recv that waits freezes that frame.
func (c *Chan[T]) recvBuffered() (v T, ok bool) {
	v, ok, _ = c.recvLocked()
	c.mu.Unlock()
	return v, ok
}

// recvLocked takes a buffered value or one from a waiting sender, or
// reports the channel closed and drained. ready is false if it would
// have to wait. Called with c.mu held.
func (c *Chan[T]) recvLocked() (v T, ok, ready bool) {
	if c.count > 0 {
		var zero T
		v = c.buf[c.head]
		c.buf[c.head] = zero
		c.head++
		if c.head == len(c.buf) {
			c.head = 0
		}
		c.count--
		// The first waiting sender's value takes the freed slot, behind
		// the values already buffered.
		for s := c.sendq.pop(); s != nil; s = c.sendq.pop() {
			sv := s.val // before the claim, after which the node is not ours
			s.ok = true
			if s.fire() {
				i := c.head + c.count
				if i >= len(c.buf) {
					i -= len(c.buf)
				}
				c.buf[i] = sv
				c.count++
				break
			}
		}
		return v, true, true
	}
	for s := c.sendq.pop(); s != nil; s = c.sendq.pop() {
		v := s.val
		s.ok = true
		if s.fire() {
			return v, true, true
		}
	}
	if c.closed {
		return v, false, true
	}
	return v, false, false
}

// Close closes the channel. Buffered values can still be received; then
// receives return at once with ok false. Waiting receivers are woken with
// ok false. As in Go, waiting senders panic. Close panics if the channel
// is already closed.
func (c *Chan[T]) Close() {
	if c == nil {
		panic(errNilClose)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		panic(errCloseClosed)
	}
	c.closed = true
	var zero T
	for r := c.recvq.pop(); r != nil; r = c.recvq.pop() {
		r.val, r.ok = zero, false
		r.fire()
	}
	for s := c.sendq.pop(); s != nil; s = c.sendq.pop() {
		s.ok = false
		s.fire()
	}
	c.mu.Unlock()
}

// The select.
