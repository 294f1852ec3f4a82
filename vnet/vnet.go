// Package vnet is TCP networking for virtual threads: a Listener and a
// Conn that implement net.Listener and net.Conn over non-blocking sockets.
// When an operation would block, the calling virtual thread parks instead
// of blocking its carrier, and the socket's readiness wakes it; called from
// a plain goroutine, the same operations block that goroutine. So
// blocking-style code (bufio, io.Copy, encoding/json over a connection)
// runs in virtual threads with the carriers left free for the others.
//
// # The poller
//
// One epoll instance serves the process. It is started when the first
// socket is opened and stopped when the last one is closed, with an
// eventfd to tell it to stop. Each socket is registered once,
// edge-triggered, for reading and writing. An operation tries its system
// call first and, on EAGAIN, parks until the next readiness edge for its
// direction, a deadline, or Close; then it tries again. While no socket is
// open, vnet holds no file descriptor and no goroutine.
//
// Two parties take readiness events from the epoll instance, whichever
// asks first. A scheduler's carrier that runs out of work asks, without
// blocking, before it sleeps, and the virtual threads it wakes run at
// once. And a goroutine of vnet's waits for the epoll descriptor itself to
// become readable through the Go runtime's network poller, as a socket of
// package net would, and then takes the events with a zero timeout: it
// never blocks in epoll_wait, which would hold a thread and make the
// runtime hand processors back and forth at every event.
//
// # Beyond net.Conn
//
// Like a *net.TCPConn, a *Conn has ReadFrom and WriteTo, so that io.Copy
// and io.CopyN between two connections move the bytes with splice(2),
// without copying them through user memory; SyscallConn, for raw access
// to the socket; and the TCP options (SetNoDelay, SetKeepAlive, SetLinger
// and the others).
//
// # Deadlines, Close and shutdown
//
// SetDeadline, SetReadDeadline and SetWriteDeadline follow net.Conn: an
// operation past its deadline fails with an error for which
// errors.Is(err, os.ErrDeadlineExceeded) holds and which is a net.Error
// whose Timeout method returns true; extending the deadline makes later
// operations succeed again. Close wakes every operation blocked on the
// connection, which fails with an error wrapping net.ErrClosed, and returns
// once the socket is closed. A blocked operation does not watch its virtual
// thread's context: to stop a virtual thread blocked in Read when the
// scheduler shuts down, close the connection (or set a deadline). A
// connection or listener dropped without Close is closed once the
// collector finds it unreachable, as in package net.
//
// # Platforms
//
// vnet works on Linux. Elsewhere the package builds, and Listen, Dial and
// DialContext return an error wrapping errors.ErrUnsupported.
//
// Name resolution (a host name rather than an IP address) runs the
// standard resolver on a goroutine of its own while the virtual thread
// parks.
package vnet

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Listener is a TCP listener whose Accept parks the calling virtual thread
// (or blocks the calling goroutine) until a connection arrives. It
// implements net.Listener. Its methods may be called concurrently. Listen
// makes one: the methods of a nil or zero Listener return
// syscall.EINVAL, as a *net.TCPListener's do, and Addr returns nil.
type Listener struct {
	fd      *netFD
	addr    *net.TCPAddr
	network string
}

// Conn is a TCP connection whose Read and Write park the calling virtual
// thread (or block the calling goroutine) while the socket is not ready.
// It implements net.Conn. Its methods may be called concurrently. Reads
// may be blocked in several callers at once; concurrent Writes (and
// ReadFrom's splice, and a syscall.RawConn's Write) take turns, as on a
// *net.TCPConn, so that the bytes of one are never interleaved with
// another's. Dial and Accept make them: the methods of a nil or zero Conn
// return syscall.EINVAL (the address methods nil), as a *net.TCPConn's do.
type Conn struct {
	fd      *netFD
	laddr   *net.TCPAddr
	raddr   *net.TCPAddr
	network string
}

var (
	_ net.Listener = (*Listener)(nil)
	_ net.Conn     = (*Conn)(nil)
)

// ok reports whether c is a connection Dial or Accept made.
func (c *Conn) ok() bool { return c != nil && c.fd != nil }

// ok reports whether l is a listener Listen made.
func (l *Listener) ok() bool { return l != nil && l.fd != nil }

// Listen announces on the local network address addr. The network must be
// "tcp", "tcp4" or "tcp6". An empty host listens on all local addresses
// (for "tcp", IPv4 and IPv6 where the system supports both, as net.Listen
// does); "0.0.0.0" listens on all IPv4 addresses, "[::]" on all IPv6 ones
// and, with "tcp", IPv4 ones (with "tcp4", it is "0.0.0.0", as in package
// net, and Dial tries 0.0.0.0 after it, as net.Dial does). A port of "0"
// (or "") chooses a free port, which Addr reports; an empty addr is ":0".
// An IPv4-mapped IPv6 address ("[::ffff:127.0.0.1]") is the IPv4
// address, as in package net, so "tcp6" finds no suitable address in it;
// Dial does the same. A host name listens on its first IPv4 address, or
// first address.
func Listen(network, addr string) (*Listener, error) {
	return ListenContext(context.Background(), network, addr)
}

// ListenContext is Listen with a context that bounds the resolution of a
// host name in addr. A nil ctx panics.
func ListenContext(ctx context.Context, network, addr string) (*Listener, error) {
	if ctx == nil {
		nilContext("ListenContext")
	}
	if err := supported(); err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	laddrs, err := resolve(ctx, network, addr, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	laddr := laddrs[0]
	fd, bound, err := sysListen(network, laddr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: laddr, Err: err}
	}
	return &Listener{fd: fd, addr: bound, network: network}, nil
}

// Accept waits for and returns the next connection to the listener, as a
// *Conn. After Close it returns an error wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	if !l.ok() {
		return nil, syscall.EINVAL
	}
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// AcceptTCP is Accept returning the *Conn type.
func (l *Listener) AcceptTCP() (*Conn, error) {
	if !l.ok() {
		return nil, syscall.EINVAL
	}
	fd, laddr, raddr, err := l.fd.accept()
	if err != nil {
		return nil, &net.OpError{Op: "accept", Net: l.network, Addr: l.addr, Err: err}
	}
	return &Conn{fd: fd, laddr: laddr, raddr: raddr, network: l.network}, nil
}

// Close stops listening and wakes every Accept blocked on the listener,
// which returns an error wrapping net.ErrClosed (a *net.OpError).
// Connections already accepted stay open.
func (l *Listener) Close() error {
	if !l.ok() {
		return syscall.EINVAL
	}
	if err := l.fd.close(); err != nil {
		return &net.OpError{Op: "close", Net: l.network, Addr: l.addr, Err: err}
	}
	return nil
}

// Addr returns the listener's network address, a *net.TCPAddr.
func (l *Listener) Addr() net.Addr {
	if !l.ok() || l.addr == nil {
		return nil
	}
	return l.addr
}

// SetDeadline sets the deadline of Accept, with the semantics of
// net.Conn's SetReadDeadline. The zero time means no deadline.
func (l *Listener) SetDeadline(t time.Time) error {
	if !l.ok() {
		return syscall.EINVAL
	}
	if err := l.fd.setDeadline(t, true, false); err != nil {
		return &net.OpError{Op: "set", Net: l.network, Addr: l.addr, Err: err}
	}
	return nil
}

// Dial connects to the address addr on the network, which must be "tcp",
// "tcp4" or "tcp6". The connection is non-blocking: the calling virtual
// thread parks until the connection is established or fails.
func Dial(network, addr string) (*Conn, error) {
	return DialContext(context.Background(), network, addr)
}

// DialContext is Dial with a context: if ctx ends before the connection is
// established, DialContext gives up and returns an error wrapping
// ctx.Err(). Once it has returned, ctx has no effect on the connection.
// When a host name resolves to several addresses, they are tried in turn,
// and a deadline of ctx is shared between them as package net shares it:
// each gets an equal part of the time left, but at least 2 seconds (or all
// of it, if less is left), so that an address that never answers does not
// use up the time of those after it. A nil ctx panics, as it does in
// net.Dialer.DialContext.
func DialContext(ctx context.Context, network, addr string) (*Conn, error) {
	if ctx == nil {
		nilContext("DialContext")
	}
	if err := supported(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	raddrs, err := resolveDialFunc(ctx, network, addr, false)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var first error
	for i, ra := range raddrs {
		dctx, cancel := partialContext(ctx, len(raddrs)-i)
		fd, laddr, raddr, err := dialTCP(dctx, network, ra)
		cancel()
		if err == nil {
			return &Conn{fd: fd, laddr: laddr, raddr: raddr, network: network}, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			// ctx ended, as the doc promises to report, whatever the
			// earlier addresses failed with.
			return nil, &net.OpError{Op: "dial", Net: network, Addr: ra, Err: cerr}
		}
		if first == nil {
			first = &net.OpError{Op: "dial", Net: network, Addr: ra, Err: err}
		}
	}
	return nil, first
}

// nilContext panics for a call of fn with a nil context.Context, which
// the context package forbids. Not inlined, to keep the callers' check
// small.
//
//go:noinline
func nilContext(fn string) {
	panic("vnet: " + fn + " with a nil Context (pass context.Background() or context.TODO() for none)")
}

// minDialPart is the least time DialContext gives one address of several
// when ctx has a deadline (package net's saneMinimum); tests shorten it.
var minDialPart = 2 * time.Second

// partialContext returns the context for dialling one address when
// remaining addresses, this one included, are left to try: ctx with an
// earlier deadline, if ctx has one, as package net's partialDeadline
// computes it (an equal share of the time left, at least minDialPart, or
// all of it if less is left). The cancel function must be called.
func partialContext(ctx context.Context, remaining int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || remaining <= 1 {
		return ctx, func() {}
	}
	now := time.Now()
	left := deadline.Sub(now)
	part := left / time.Duration(remaining)
	if part < minDialPart {
		part = min(left, minDialPart)
	}
	if part >= left {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, now.Add(part))
}

// dialTCP is sysDial with package net's retries (net/tcpsock_posix.go):
// a kernel that picks, as the source port, the very port it dials
// connects the socket to itself when nothing listens there (TCP's
// simultaneous open), and one that picks a source address already in use
// fails with EADDRNOTAVAIL. Either is dialled again, twice at most, after
// which the result stands.
func dialTCP(ctx context.Context, network string, ra *net.TCPAddr) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
	fd, laddr, raddr, err := sysDialFunc(ctx, network, ra)
	for i := 0; i < 2 && (selfConnect(laddr, raddr, err) || errors.Is(err, syscall.EADDRNOTAVAIL)); i++ {
		if err == nil {
			fd.close()
		}
		fd, laddr, raddr, err = sysDialFunc(ctx, network, ra)
	}
	return fd, laddr, raddr, err
}

// sysDialFunc is sysDial, and resolveDialFunc the resolve of DialContext,
// which tests replace.
var (
	sysDialFunc     = sysDial
	resolveDialFunc = resolve
)

// selfConnect reports whether a dial that succeeded connected the socket
// to itself. A local address that could not be read is taken for one too,
// as package net does: a dial that went so wrong is better tried again.
func selfConnect(laddr, raddr *net.TCPAddr, err error) bool {
	if err != nil {
		return false
	}
	if laddr == nil || raddr == nil {
		return true
	}
	return laddr.Port == raddr.Port && laddr.IP.Equal(raddr.IP)
}

// Read reads up to len(p) bytes into p. It parks the calling virtual
// thread until some data is available, the peer closes its side (io.EOF),
// the read deadline passes, or the connection is closed. A Read of zero
// bytes returns 0 and nil at once (an error only on a closed connection),
// as package net's does.
func (c *Conn) Read(p []byte) (int, error) {
	if !c.ok() {
		return 0, syscall.EINVAL
	}
	n, err := c.fd.read(p)
	if err != nil && err != io.EOF {
		err = c.opError("read", err)
	}
	return n, err
}

// Write writes all of p, parking the calling virtual thread whenever the
// socket's send buffer is full. It returns len(p) and nil, or the number of
// bytes written before an error: the write deadline passed, the connection
// was closed, or the socket failed. A Write that another is in progress
// on waits for it to finish (or fail) first, or for the write deadline.
func (c *Conn) Write(p []byte) (int, error) {
	if !c.ok() {
		return 0, syscall.EINVAL
	}
	n, err := c.fd.write(p)
	if err != nil {
		err = c.opError("write", err)
	}
	return n, err
}

// Close closes the connection. Read and Write calls blocked on it, in
// virtual threads or goroutines, return an error wrapping net.ErrClosed;
// Close returns once they have and the socket is closed. Closing it again
// returns an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	if !c.ok() {
		return syscall.EINVAL
	}
	if err := c.fd.close(); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// CloseRead shuts down the reading side of the connection (shutdown(2)
// with SHUT_RD).
func (c *Conn) CloseRead() error {
	if !c.ok() {
		return syscall.EINVAL
	}
	if err := c.fd.shutdown(shutRead); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// CloseWrite shuts down the writing side of the connection (shutdown(2)
// with SHUT_WR): the peer reads io.EOF once it has read everything written
// before, and can still send. An echo server that copies until io.EOF and
// then calls CloseWrite passes the end of the stream on.
func (c *Conn) CloseWrite() error {
	if !c.ok() {
		return syscall.EINVAL
	}
	if err := c.fd.shutdown(shutWrite); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// LocalAddr returns the local network address, a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr {
	if !c.ok() || c.laddr == nil {
		return nil // not a nil *net.TCPAddr in the interface
	}
	return c.laddr
}

// RemoteAddr returns the remote network address, a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr {
	if !c.ok() || c.raddr == nil {
		return nil
	}
	return c.raddr
}

// SetDeadline sets the read and write deadlines, as SetReadDeadline and
// SetWriteDeadline do.
func (c *Conn) SetDeadline(t time.Time) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	if err := c.fd.setDeadline(t, true, true); err != nil {
		return c.opError("set", err)
	}
	return nil
}

// SetReadDeadline sets the deadline for Read calls, pending ones included.
// After it, Read fails with an error for which errors.Is(err,
// os.ErrDeadlineExceeded) holds and whose Timeout method returns true,
// until the deadline is moved to the future. The zero time means no
// deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	if err := c.fd.setDeadline(t, true, false); err != nil {
		return c.opError("set", err)
	}
	return nil
}

// SetWriteDeadline sets the deadline for Write calls, pending ones
// included, as SetReadDeadline does for Read. A Write that times out may
// have written part of its buffer, and says how much.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	if err := c.fd.setDeadline(t, false, true); err != nil {
		return c.opError("set", err)
	}
	return nil
}

func (c *Conn) opError(op string, err error) error {
	e := &net.OpError{Op: op, Net: c.network, Err: err}
	if c.laddr != nil {
		e.Source = c.laddr
	}
	if c.raddr != nil {
		e.Addr = c.raddr
	}
	return e
}

// How shutdown closes a connection.
const (
	shutRead = iota
	shutWrite
)
