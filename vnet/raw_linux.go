package vnet

import (
	"io"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// This file is what a net.TCPConn offers beyond net.Conn: raw access to
// the socket (syscall.RawConn), socket options, and the splice(2) path
// io.Copy takes between two connections. Like read and write, the
// functions that may park have no defer statements (see waiter), but for
// the ones that call a function of the user's, which may panic: a
// reference it left behind would make a later Close wait forever.

// control runs f with the socket's descriptor, which stays open until f
// returns.
func (fd *netFD) control(f func(fd uintptr)) error {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return err
	}
	defer pd.decref() // if f panics too
	f(uintptr(pd.fd))
	runtime.KeepAlive(fd)
	return nil
}

// rawRead calls f with the descriptor until f reports done, waiting for
// the socket to become readable after each call that is not, as
// syscall.RawConn.Read does. It fails, without calling f again, once the
// read deadline has passed or the socket is closed.
func (fd *netFD) rawRead(f func(fd uintptr) bool) error { return fd.rawOp(&fd.pd.r, f) }

// rawWrite is rawRead for writability and the write deadline.
func (fd *netFD) rawWrite(f func(fd uintptr) bool) error { return fd.rawOp(&fd.pd.w, f) }

func (fd *netFD) rawOp(d *dir, f func(fd uintptr) bool) error {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return err
	}
	defer pd.decref() // if f panics too
	if d == &pd.w {
		// A raw write holds the write lock, as package net's does.
		if err := pd.writeLock(); err != nil {
			return err
		}
		defer pd.writeUnlock()
	}
	var err error
	for {
		if err = pd.check(d); err != nil {
			break
		}
		seq := d.seq.Load()
		if f(uintptr(pd.fd)) {
			break
		}
		if err = pd.wait(d, seq, nil); err != nil {
			break
		}
	}
	runtime.KeepAlive(fd)
	return err
}

// sockopt calls set with the socket's descriptor, which stays open until
// it returns, and wraps its error.
func (fd *netFD) sockopt(set func(s int) error) error {
	var err error
	if cerr := fd.control(func(s uintptr) { err = set(int(s)) }); cerr != nil {
		return cerr
	}
	if err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	return nil
}

// setsockopt sets an integer socket option.
func (fd *netFD) setsockopt(level, opt, value int) error {
	return fd.sockopt(func(s int) error { return unix.SetsockoptInt(s, level, opt, value) })
}

func (fd *netFD) setNoDelay(on bool) error {
	return fd.setsockopt(unix.IPPROTO_TCP, unix.TCP_NODELAY, boolInt(on))
}

func (fd *netFD) setKeepAlive(on bool) error {
	return fd.setsockopt(unix.SOL_SOCKET, unix.SO_KEEPALIVE, boolInt(on))
}

// setKeepAliveIdle sets the idle time before the first probe, d > 0,
// rounded up to whole seconds.
func (fd *netFD) setKeepAliveIdle(d time.Duration) error {
	return fd.setsockopt(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, int((d+time.Second-1)/time.Second))
}

func (fd *netFD) setLinger(sec int) error {
	l := unix.Linger{}
	if sec >= 0 {
		l.Onoff, l.Linger = 1, int32(sec)
	}
	return fd.sockopt(func(s int) error { return unix.SetsockoptLinger(s, unix.SOL_SOCKET, unix.SO_LINGER, &l) })
}

func (fd *netFD) setReadBuffer(bytes int) error {
	return fd.setsockopt(unix.SOL_SOCKET, unix.SO_RCVBUF, bytes)
}

func (fd *netFD) setWriteBuffer(bytes int) error {
	return fd.setsockopt(unix.SOL_SOCKET, unix.SO_SNDBUF, bytes)
}

// maxSplice is the most one splice(2) call moves: the default capacity of
// a pipe, which holds what was read until it is written.
const maxSplice = 64 << 10

// splice copies up to remain bytes (all, if remain < 0) from src to dst in
// the kernel, through a pipe, until src reaches its end: splice(2) from
// src's socket into the pipe, then from the pipe into dst's, parking on
// whichever socket is not ready; bytes read from src that dst then fails
// to take are lost, as with package net's splice. It holds a reference to
// each socket only while it uses that one, as package net does: closing
// either wakes a splice parked on it, and does not wait for one parked on
// the other. handled is false, with nothing copied, if the kernel will
// not splice these sockets; the caller then copies through a buffer. A
// failure on src is reported in srcErr, one on dst in dstErr, so that the
// caller can say which connection failed.
func splice(dst, src *netFD, remain int64) (written int64, handled bool, srcErr, dstErr error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return 0, false, nil, nil
	}
	spd, dpd := src.pd, dst.pd
	// dst's write lock, for all of the splice (package net's splice takes
	// it per chunk, internal/poll's splicePump): a concurrent Write goes
	// before or after the bytes spliced, never among them, as docs/api.md
	// promises; one with a write deadline gives up at it (writeLock).
	// Taking it needs a reference; the splice keeps none while it waits
	// on src.
	if dstErr = dpd.incref(); dstErr == nil {
		dstErr = dpd.writeLock()
		dpd.decref()
	}
	if dstErr != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return 0, true, nil, dstErr
	}
	handled = true
	for remain != 0 {
		chunk := maxSplice
		if remain > 0 && remain < int64(chunk) {
			chunk = int(remain)
		}
		// src into the pipe, which is empty: EAGAIN is src's.
		if srcErr = spd.incref(); srcErr != nil {
			break
		}
		if srcErr = spd.check(&spd.r); srcErr != nil {
			spd.decref()
			break
		}
		seq := spd.r.seq.Load()
		n, err := unix.Splice(spd.fd, nil, p[1], nil, chunk, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if err == unix.EINTR {
			spd.decref()
			continue
		}
		if err == unix.EAGAIN {
			srcErr = spd.wait(&spd.r, seq, nil)
			spd.decref()
			if srcErr != nil {
				break
			}
			continue
		}
		spd.decref()
		if err != nil {
			if written == 0 && (err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) {
				handled = false // nothing moved: the caller copies instead
			} else {
				srcErr = os.NewSyscallError("splice", err)
			}
			break
		}
		if n == 0 {
			break // src's end
		}
		// The pipe into dst, until it is empty.
		if dstErr = dpd.incref(); dstErr != nil {
			break
		}
		for inPipe := int64(n); inPipe > 0; { // n is an int on 32-bit systems
			if dstErr = dpd.check(&dpd.w); dstErr != nil {
				break
			}
			seq := dpd.w.seq.Load()
			m, err := unix.Splice(p[0], nil, dpd.fd, nil, int(inPipe), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				if dstErr = dpd.wait(&dpd.w, seq, nil); dstErr != nil {
					break
				}
				continue
			}
			if err != nil {
				dstErr = os.NewSyscallError("splice", err)
				break
			}
			inPipe -= int64(m)
			written += int64(m)
		}
		dpd.decref()
		if dstErr != nil {
			break
		}
		if remain > 0 {
			remain -= int64(n)
		}
	}
	dpd.writeUnlock()
	if countParks {
		stats.spliced.Add(uint64(written))
	}
	unix.Close(p[0])
	unix.Close(p[1])
	runtime.KeepAlive(src)
	runtime.KeepAlive(dst)
	return written, handled, srcErr, dstErr
}

// readFrom is Conn.ReadFrom's splice path: r is a *Conn, or an
// *io.LimitedReader over one (what io.CopyN passes).
func (c *Conn) readFrom(r io.Reader) (n int64, handled bool, err error) {
	remain := int64(-1)
	lr, limited := r.(*io.LimitedReader)
	if limited {
		if lr.N <= 0 {
			return 0, true, nil
		}
		remain, r = lr.N, lr.R
	}
	src, ok := r.(*Conn)
	if !ok {
		return 0, false, nil
	}
	if !src.ok() {
		return 0, true, unix.EINVAL // as src.Read would: syscall.EINVAL
	}
	n, handled, srcErr, dstErr := splice(c.fd, src.fd, remain)
	if limited {
		lr.N -= n
	}
	switch {
	case srcErr != nil:
		err = src.opError("read", srcErr)
	case dstErr != nil:
		err = c.opError("write", dstErr)
	}
	return n, handled, err
}
