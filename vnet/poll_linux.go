package vnet

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/weftrt/weft/internal/netpoll"
	"github.com/weftrt/weft/internal/proflabel"
	"golang.org/x/sys/unix"
)

// The poller: one epoll instance for the process, with a goroutine blocked
// in epoll_wait. It exists while at least one socket is registered: the
// first registration starts it, the last unregistration stops it (its
// goroutine closes the epoll fd and the eventfd and exits). A later
// registration starts a new one.
type poller struct {
	epfd int
	evfd int // eventfd, registered under key wakeKey: written to stop the loop
	// file holds epfd for the runtime's network poller, through which
	// the loop waits; rc is its raw access.
	file *os.File
	rc   syscall.RawConn

	mu   sync.RWMutex
	fds  map[int32]*pollDesc // by key; the key rides in the epoll event
	next uint32              // last key handed out
	n    int                 // registered sockets (under pollMu)

	stopping atomic.Bool
	// blocking makes the loop block in epoll_wait from the start, as it
	// does if the runtime will not poll the epoll descriptor (tests set
	// it through blockingPoll).
	blocking bool
}

// blockingPoll is the blocking field of pollers started from now on.
var blockingPoll atomic.Bool

// wakeKey is the epoll key of the poller's eventfd; sockets get others.
const wakeKey = 0

var (
	pollMu  sync.Mutex // guards current and every poller's n
	current *poller
	// active is current, for pollNow, which takes no lock.
	active atomic.Pointer[poller]
)

// stats counts the times operations parked, and the bytes splice moved,
// when countParks is set (by the tests, before anything runs: a global
// counter would be contended).
var (
	countParks bool
	stats      struct {
		readParks, writeParks atomic.Uint64
		spliced               atomic.Uint64
	}
)

func startPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeKey}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	p := &poller{epfd: epfd, evfd: evfd, fds: make(map[int32]*pollDesc), blocking: blockingPoll.Load()}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	p.file = os.NewFile(uintptr(epfd), "vnet-epoll")
	rc, err := p.file.SyscallConn()
	if err != nil {
		unix.Close(evfd)
		p.file.Close()
		return nil, err
	}
	p.rc = rc
	go p.loop()
	return p, nil
}

// pollNow takes the readiness events already pending, without blocking,
// and wakes their waiters; it reports whether there were any. Carriers
// call it when they run out of work (internal/netpoll), so that a virtual
// thread whose socket became ready runs at once on an idle carrier rather
// than when the loop's goroutine is next scheduled; the events go to
// whichever of the two asks first.
func pollNow() bool {
	p := active.Load()
	if p == nil {
		return false
	}
	b := pollBufs.Get().(*pollBuf)
	defer pollBufs.Put(b)
	// Control holds the descriptor open across the call: the loop may
	// close it at any time once the last socket is gone.
	if p.rc.Control(b.wait) != nil {
		return false
	}
	woke := false
	for i := range b.events[:max(b.n, 0)] {
		ev := &b.events[i]
		if ev.Fd == wakeKey {
			// The loop's stop signal, level-triggered: the loop sees it
			// too, until it reads the eventfd.
			continue
		}
		woke = p.dispatch(ev) || woke
	}
	return woke
}

// A pollBuf is pollNow's buffer for epoll_wait, with the function that
// fills it made once: a closure made at each call, and the array it
// writes, would escape to the heap through RawConn.Control, 400 bytes on
// every look of every idle carrier.
type pollBuf struct {
	events [32]unix.EpollEvent
	n      int
	wait   func(fd uintptr)
}

var pollBufs = sync.Pool{New: func() any {
	b := new(pollBuf)
	b.wait = func(fd uintptr) { b.n, _ = unix.EpollWait(int(fd), b.events[:], 0) }
	return b
}}

// dispatch hands a socket's readiness event to its pollDesc, if the
// socket is still registered, and reports whether it was.
func (p *poller) dispatch(ev *unix.EpollEvent) bool {
	p.mu.RLock()
	pd := p.fds[ev.Fd]
	p.mu.RUnlock()
	if pd == nil {
		return false
	}
	pd.ready(ev.Events)
	return true
}

func init() { netpoll.Install(pollNow) }

// loop waits for readiness and wakes the operations waiting for it. It
// owns epfd and evfd, and closes them when told to stop.
//
// It does not block in epoll_wait: a goroutine blocked in a system call
// holds a thread, and its P until the runtime's monitor takes it away,
// and wakes up without one. The epoll descriptor is itself pollable, so
// the loop waits for it through the runtime's network poller, as any
// socket of package net does, and calls epoll_wait only when it has
// events, with a zero timeout.
func (p *poller) loop() {
	// The go statement gave this goroutine the profiler labels of whoever
	// opened the first socket (a request's, a virtual thread's); it serves
	// every socket until the last closes, so it keeps none.
	setProfLabel(nil)
	events := make([]unix.EpollEvent, 256)
	blocking := p.blocking
	for {
		var n int
		var werr error
		if !blocking {
			err := p.rc.Read(func(fd uintptr) bool {
				n, werr = unix.EpollWait(int(fd), events, 0)
				return n > 0 || (werr != nil && werr != unix.EINTR)
			})
			if err != nil && werr == nil {
				// The runtime would not poll the descriptor: wait in
				// epoll_wait itself from now on, as a blocking call.
				blocking = true
				continue
			}
		} else {
			n, werr = unix.EpollWait(p.epfd, events, -1)
			if werr == unix.EINTR {
				continue
			}
		}
		if err := werr; err != nil {
			panic(fmt.Sprintf("vnet: epoll_wait: %v", err))
		}
		for i := range events[:n] {
			ev := &events[i]
			if ev.Fd == wakeKey {
				var buf [8]byte
				unix.Read(p.evfd, buf[:])
				if p.stopping.Load() {
					unix.Close(p.evfd)
					p.file.Close()
					return
				}
				continue
			}
			p.dispatch(ev)
		}
	}
}

// setProfLabel is proflabel.Set.
func setProfLabel(labels unsafe.Pointer) { proflabel.Set(labels) }

// stop tells the loop to close its descriptors and exit. Called with
// pollMu held, once nothing is registered.
func (p *poller) stop() {
	p.stopping.Store(true)
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		_, err := unix.Write(p.evfd, one[:])
		if err != unix.EINTR {
			break
		}
	}
}

// register adds fd to the poller, starting the poller if none runs.
func register(fd int) (*pollDesc, error) {
	pollMu.Lock()
	p := current
	if p == nil {
		var err error
		if p, err = startPoller(); err != nil {
			pollMu.Unlock()
			return nil, err
		}
		current = p
		active.Store(p)
	}
	pd := &pollDesc{fd: fd, p: p}
	p.mu.Lock()
	for {
		p.next++
		k := int32(p.next)
		if _, used := p.fds[k]; k != wakeKey && !used {
			pd.key = k
			break
		}
	}
	p.fds[pd.key] = pd
	p.mu.Unlock()
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET,
		Fd:     pd.key,
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		p.mu.Lock()
		delete(p.fds, pd.key)
		p.mu.Unlock()
		if p.n == 0 {
			current = nil
			active.Store(nil)
			p.stop()
		}
		pollMu.Unlock()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	p.n++
	pollMu.Unlock()
	return pd, nil
}

// unregister removes pd's socket from its poller, and stops the poller if
// it was the last.
func (pd *pollDesc) unregister() {
	p := pd.p
	pollMu.Lock()
	unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, pd.fd, nil)
	p.mu.Lock()
	delete(p.fds, pd.key)
	p.mu.Unlock()
	p.n--
	if p.n == 0 {
		if current == p {
			current = nil
			active.Store(nil)
		}
		p.stop()
	}
	pollMu.Unlock()
}

// A pollDesc is a registered socket: its readiness, waiters, deadlines and
// references.
//
// Edge-triggered readiness is kept as a sequence number per direction,
// which the poller increments on each edge. An operation reads it before
// its system call; on EAGAIN it queues itself only if the number has not
// moved since, so an edge that arrived between the call and the queueing is
// not lost.
//
// refs counts the operations in progress (each holds a reference while it
// uses fd) and has closedBit set by Close. Whoever drops the last
// reference once closedBit is set unregisters and closes the socket, so fd
// is never closed, and its number reused, under a system call.
type pollDesc struct {
	fd  int
	key int32
	p   *poller

	refs   atomic.Uint64
	closer atomic.Pointer[waiter] // Close's, waiting for the socket to close
	errc   error                  // the error closing fd, for Close

	mu sync.Mutex // guards the waiters, deadline timers and write lock
	r  dir
	w  dir

	// The write lock, which a write holds for all of its call, parks
	// included, so that concurrent Writes do not interleave their bytes,
	// as on a *net.TCPConn: wlocked says it is held, wq are the
	// writers waiting for it, woken by its release (the first) or by
	// Close (all).
	wlocked bool
	wq      []*waiter
}

// dir is one direction of a pollDesc.
type dir struct {
	seq     atomic.Uint64 // readiness edges seen
	expired atomic.Bool   // the deadline has passed
	waiters []*waiter
	timer   *time.Timer
	gen     uint64 // deadline generation, so that a stale timer does nothing
}

const closedBit = 1 << 63

var (
	errClosed  = net.ErrClosed
	errTimeout = os.ErrDeadlineExceeded
)

// incref takes a reference for an operation, or fails once Close has
// begun.
func (pd *pollDesc) incref() error {
	for {
		v := pd.refs.Load()
		if v&closedBit != 0 {
			return errClosed
		}
		if pd.refs.CompareAndSwap(v, v+1) {
			return nil
		}
	}
}

// decref drops a reference, and closes the socket if it was the last one
// after Close.
func (pd *pollDesc) decref() {
	if pd.refs.Add(^uint64(0)) == closedBit {
		pd.destroy()
		pd.closer.Load().wake() // set before closedBit
	}
}

func (pd *pollDesc) closing() bool { return pd.refs.Load()&closedBit != 0 }

// close marks pd closed, wakes its waiters and waits until the socket is
// closed.
func (pd *pollDesc) close() error {
	w := newWaiter()
	if !pd.closer.CompareAndSwap(nil, w) {
		return errClosed
	}
	if !pd.shut() {
		return pd.destroy()
	}
	w.wait()
	return pd.errc
}

// closeLeaked closes the socket of a netFD that became unreachable
// unclosed. It runs as a cleanup, so it does not wait.
func (pd *pollDesc) closeLeaked() {
	w := &waiter{ch: make(chan struct{}, 1)}
	if pd.closer.CompareAndSwap(nil, w) && !pd.shut() {
		pd.destroy()
	}
}

// shut sets closedBit and wakes the waiters. It reports whether
// operations are still in progress; if not, the caller closes the socket.
func (pd *pollDesc) shut() bool {
	if pd.refs.Or(closedBit) == 0 {
		return false
	}
	pd.mu.Lock()
	ws := pd.w.take(pd.r.take(nil))
	ws = append(ws, pd.wq...)
	pd.wq = nil
	pd.mu.Unlock()
	wakeAll(ws)
	return true
}

// writeLock takes pd's write lock, parking (or blocking) while another
// write holds it; it fails once Close has begun, or, while it waits, once
// the write deadline has passed. The caller holds a reference. No defer:
// see waiter.
func (pd *pollDesc) writeLock() error {
	for {
		pd.mu.Lock()
		if pd.closing() {
			pd.mu.Unlock()
			return errClosed
		}
		if !pd.wlocked {
			pd.wlocked = true
			pd.mu.Unlock()
			return nil
		}
		// A write waiting for its turn honours the write deadline, as
		// one parked on the socket does: the holder may be a splice
		// parked on its source, which the deadline does not wake. The
		// deadline's expiry wakes the queue (takeExpired).
		if pd.w.expired.Load() {
			pd.mu.Unlock()
			return errTimeout
		}
		// Close sets closedBit before it takes the queue under mu, so
		// a writer queued here is either woken by it or saw it above.
		w := newWaiter()
		pd.wq = append(pd.wq, w)
		pd.mu.Unlock()
		w.wait()
	}
}

// writeUnlock releases pd's write lock and wakes the first writer waiting
// for it, which takes it unless a newcomer has meanwhile.
func (pd *pollDesc) writeUnlock() {
	pd.mu.Lock()
	pd.wlocked = false
	var w *waiter
	if len(pd.wq) > 0 {
		w = pd.wq[0]
		pd.wq[0] = nil
		pd.wq = pd.wq[1:]
	}
	pd.mu.Unlock()
	if w != nil {
		w.wake()
	}
}

// destroy unregisters and closes the socket.
func (pd *pollDesc) destroy() error {
	pd.mu.Lock()
	pd.r.stopTimer()
	pd.w.stopTimer()
	pd.mu.Unlock()
	pd.unregister()
	if err := unix.Close(pd.fd); err != nil {
		pd.errc = os.NewSyscallError("close", err)
	}
	return pd.errc
}

// take moves the waiters of d onto the end of into and returns it. d
// keeps its array for the waiters to come, so that a park queues itself
// without allocating, unless a crowd of waiters made it large. Called
// with pd.mu held.
func (d *dir) take(into []*waiter) []*waiter {
	into = append(into, d.waiters...)
	clear(d.waiters)
	if cap(d.waiters) > maxKeptWaiters {
		d.waiters = nil
	} else {
		d.waiters = d.waiters[:0]
	}
	return into
}

// maxKeptWaiters is the largest array of waiters a direction keeps once
// its waiters are taken.
const maxKeptWaiters = 16

func (d *dir) stopTimer() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.gen++
}

// ready records readiness edges reported by epoll and wakes the waiters
// of the directions concerned.
func (pd *pollDesc) ready(events uint32) {
	const (
		rmask = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR | unix.EPOLLPRI
		wmask = unix.EPOLLOUT | unix.EPOLLHUP | unix.EPOLLERR
	)
	r, w := events&rmask != 0, events&wmask != 0
	if r {
		pd.r.seq.Add(1)
	}
	if w {
		pd.w.seq.Add(1)
	}
	var buf [4]*waiter // usually enough: no allocation
	ws := buf[:0]
	pd.mu.Lock()
	if r {
		ws = pd.r.take(ws)
	}
	if w {
		ws = pd.w.take(ws)
	}
	pd.mu.Unlock()
	wakeAll(ws)
}

// check reports why an operation in direction d cannot go on: the socket
// is closed or d's deadline has passed.
func (pd *pollDesc) check(d *dir) error {
	if pd.closing() {
		return errClosed
	}
	if d.expired.Load() {
		return errTimeout
	}
	return nil
}

// wait parks the caller until d's readiness sequence moves past seq, d's
// deadline passes, the socket is closed or, if ctx is not nil, ctx ends.
// It returns nil when the caller should try its operation again (which
// may be spuriously), or why not.
//
// No defer here or in the callers that park: see waiter.
func (pd *pollDesc) wait(d *dir, seq uint64, ctx context.Context) error {
	pd.mu.Lock()
	if err := pd.check(d); err != nil {
		pd.mu.Unlock()
		return err
	}
	if d.seq.Load() != seq {
		pd.mu.Unlock()
		return nil
	}
	w := newWaiter()
	d.waiters = append(d.waiters, w)
	pd.mu.Unlock()
	if countParks {
		if d == &pd.r {
			stats.readParks.Add(1)
		} else {
			stats.writeParks.Add(1)
		}
	}
	if ctx == nil || ctx.Done() == nil {
		w.wait()
		return nil
	}
	stop := context.AfterFunc(ctx, w.wake)
	w.wait()
	if stop() {
		return nil
	}
	// ctx ended: w may still be queued.
	pd.mu.Lock()
	for i, x := range d.waiters {
		if x == w {
			d.waiters = slices.Delete(d.waiters, i, i+1) // clears the freed slot
			break
		}
	}
	pd.mu.Unlock()
	return ctx.Err()
}

// setDeadline sets the deadline of direction d, with pd.mu held; it
// returns the waiters to wake if the deadline has passed already.
func (pd *pollDesc) setDeadline(d *dir, t time.Time) []*waiter {
	d.stopTimer()
	if t.IsZero() {
		d.expired.Store(false)
		return nil
	}
	dur := time.Until(t)
	if dur <= 0 {
		d.expired.Store(true)
		return pd.takeExpired(d)
	}
	d.expired.Store(false)
	gen := d.gen
	d.timer = time.AfterFunc(dur, func() { pd.expire(d, gen) })
	return nil
}

// expire is a deadline timer firing.
func (pd *pollDesc) expire(d *dir, gen uint64) {
	pd.mu.Lock()
	if d.gen != gen {
		pd.mu.Unlock()
		return
	}
	d.expired.Store(true)
	d.timer = nil
	ws := pd.takeExpired(d)
	pd.mu.Unlock()
	wakeAll(ws)
}

// takeExpired returns the waiters that d's deadline passing wakes: those
// parked on d and, for writes, those waiting for the write lock. Called
// with pd.mu held.
func (pd *pollDesc) takeExpired(d *dir) []*waiter {
	ws := d.take(nil)
	if d == &pd.w && len(pd.wq) > 0 {
		ws = append(ws, pd.wq...)
		pd.wq = nil
	}
	return ws
}
