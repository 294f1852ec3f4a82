package vnet

import (
	"io"
	"net"
	"syscall"
	"time"
)

// What a net.TCPConn and a net.TCPListener offer beyond net.Conn and
// net.Listener: raw access to the socket, TCP options, and the ReadFrom
// and WriteTo that io.Copy uses.

var (
	_ syscall.Conn  = (*Conn)(nil)
	_ syscall.Conn  = (*Listener)(nil)
	_ io.ReaderFrom = (*Conn)(nil)
	_ io.WriterTo   = (*Conn)(nil)
)

// SyscallConn returns raw access to the connection's socket, for socket
// options and system calls vnet does not make. The RawConn's Read and
// Write call their function again each time the socket becomes readable
// (writable) while it returns false, parking the calling virtual thread
// (or blocking the calling goroutine) in between; they honour the read
// (write) deadline and Close as Read and Write do. The descriptor must not
// be closed, or kept past the function's return.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if !c.ok() {
		return nil, syscall.EINVAL
	}
	return &rawConn{fd: c.fd, opError: c.opError}, nil
}

// SyscallConn returns raw access to the listener's socket, as
// Conn.SyscallConn does; its Read waits for readability, which for a
// listening socket is a pending connection.
func (l *Listener) SyscallConn() (syscall.RawConn, error) {
	if !l.ok() {
		return nil, syscall.EINVAL
	}
	return &rawConn{fd: l.fd, opError: func(op string, err error) error {
		return &net.OpError{Op: op, Net: l.network, Addr: l.addr, Err: err}
	}}, nil
}

// rawConn is the syscall.RawConn of a Conn or a Listener.
type rawConn struct {
	fd      *netFD
	opError func(op string, err error) error
}

func (r *rawConn) Control(f func(fd uintptr)) error {
	if err := r.fd.control(f); err != nil {
		return r.opError("raw-control", err)
	}
	return nil
}

func (r *rawConn) Read(f func(fd uintptr) (done bool)) error {
	if err := r.fd.rawRead(f); err != nil {
		return r.opError("raw-read", err)
	}
	return nil
}

func (r *rawConn) Write(f func(fd uintptr) (done bool)) error {
	if err := r.fd.rawWrite(f); err != nil {
		return r.opError("raw-write", err)
	}
	return nil
}

// SetNoDelay controls Nagle's algorithm (TCP_NODELAY). Connections start
// with no delay, as in package net: a write is sent at once.
func (c *Conn) SetNoDelay(noDelay bool) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	return c.setOpt(c.fd.setNoDelay(noDelay))
}

// SetKeepAlive turns TCP keep-alive probes on or off (SO_KEEPALIVE).
// Unlike package net's, vnet's connections start without them.
func (c *Conn) SetKeepAlive(keepalive bool) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	return c.setOpt(c.fd.setKeepAlive(keepalive))
}

// SetKeepAlivePeriod sets how long the connection must be idle before
// the first keep-alive probe (TCP_KEEPIDLE), rounded up to whole seconds,
// as net.TCPConn.SetKeepAlivePeriod does: zero means 15 seconds, and a
// negative d leaves the setting as it is.
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	switch {
	case d == 0:
		d = defaultKeepAliveIdle
	case d < 0:
		return nil
	}
	return c.setOpt(c.fd.setKeepAliveIdle(d))
}

// defaultKeepAliveIdle is SetKeepAlivePeriod's zero: package net's.
const defaultKeepAliveIdle = 15 * time.Second

// SetLinger sets what Close does with data not yet sent (SO_LINGER), as
// net.TCPConn.SetLinger does: sec < 0 (the default) sends it in the
// background; sec == 0 discards it and resets the connection; sec > 0
// sends it in the background for up to sec seconds, then resets.
func (c *Conn) SetLinger(sec int) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	return c.setOpt(c.fd.setLinger(sec))
}

// SetReadBuffer sets the size of the socket's receive buffer (SO_RCVBUF).
func (c *Conn) SetReadBuffer(bytes int) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	return c.setOpt(c.fd.setReadBuffer(bytes))
}

// SetWriteBuffer sets the size of the socket's send buffer (SO_SNDBUF).
func (c *Conn) SetWriteBuffer(bytes int) error {
	if !c.ok() {
		return syscall.EINVAL
	}
	return c.setOpt(c.fd.setWriteBuffer(bytes))
}

func (c *Conn) setOpt(err error) error {
	if err != nil {
		return c.opError("set", err)
	}
	return nil
}

// ReadFrom copies from r to the connection until r reports io.EOF or an
// error, and returns how many bytes it wrote; it is what io.Copy calls.
// From another *Conn (or an io.LimitedReader over one, from io.CopyN) the
// bytes move in the kernel with splice(2), without passing through user
// memory, as package net does between TCP connections; from anything else
// they go through a buffer. The calling virtual thread parks whenever
// either socket is not ready. An error names the connection that failed:
// a read error is r's, a write error c's.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if !c.ok() {
		return 0, syscall.EINVAL
	}
	if n, handled, err := c.readFrom(r); handled {
		return n, err
	}
	return c.copyFrom(r)
}

// copyFrom is ReadFrom's buffered copy. Not inlined: the copy's
// temporaries are stack objects, and a frame holding one under a park
// makes every park there take the general capture path.
//
//go:noinline
func (c *Conn) copyFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{c}, r)
}

// WriteTo copies from the connection to w until the peer closes its side
// (the end of the stream is not an error) or an error, and returns how
// many bytes it read. To another *Conn it splices, as ReadFrom does.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	if !c.ok() {
		return 0, syscall.EINVAL
	}
	if dst, ok := w.(*Conn); ok {
		return dst.ReadFrom(c)
	}
	return c.copyTo(w)
}

// copyTo is WriteTo's buffered copy, not inlined for copyFrom's reason.
//
//go:noinline
func (c *Conn) copyTo(w io.Writer) (int64, error) {
	return io.Copy(w, readerOnly{c})
}

// writerOnly and readerOnly hide ReadFrom and WriteTo from io.Copy, which
// would call them back.
type writerOnly struct{ io.Writer }
type readerOnly struct{ io.Reader }
