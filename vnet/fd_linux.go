package vnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// netFD is a non-blocking socket registered with the poller.
//
// The methods that may park (read, write, accept, connect, and wait under
// them) have no defer statements: see waiter.
//
// A netFD that becomes unreachable unclosed is closed by a cleanup, as
// package net does; the operations keep their netFD alive until they
// return, so that this never happens under them.
type netFD struct {
	pd      *pollDesc
	cleanup runtime.Cleanup
}

// maxRW caps one read or write system call, as package os does.
const maxRW = 1 << 30

func sysSocket(family int) (int, error) {
	s, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return s, nil
}

func supported() error { return nil }

// newFD registers socket s with the poller; it closes s if it cannot.
func newFD(s int) (*netFD, error) {
	pd, err := register(s)
	if err != nil {
		unix.Close(s)
		return nil, err
	}
	fd := &netFD{pd: pd}
	fd.cleanup = runtime.AddCleanup(fd, (*pollDesc).closeLeaked, pd)
	return fd, nil
}

// backlog is the listen(2) backlog: the system's maximum, as net.Listen
// uses.
var backlog = sync.OnceValue(func() int {
	n := unix.SOMAXCONN
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			n = v
		}
	}
	return min(n, 1<<16-1)
})

func sysListen(network string, laddr *net.TCPAddr) (*netFD, *net.TCPAddr, error) {
	if network == "tcp" && laddr.IP == nil {
		// All addresses: IPv6 with IPv4-mapped addresses where the
		// system supports it, else IPv4.
		fd, a, err := listenFamily(unix.AF_INET6, false, laddr)
		if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL) {
			return listenFamily(unix.AF_INET, false, laddr)
		}
		return fd, a, err
	}
	if network == "tcp4" || laddr.IP.To4() != nil && network != "tcp6" {
		return listenFamily(unix.AF_INET, false, laddr)
	}
	return listenFamily(unix.AF_INET6, network == "tcp6", laddr)
}

func listenFamily(family int, v6only bool, laddr *net.TCPAddr) (*netFD, *net.TCPAddr, error) {
	sa, err := sockaddr(family, laddr)
	if err != nil {
		return nil, nil, err
	}
	s, err := sysSocket(family)
	if err != nil {
		return nil, nil, err
	}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, boolInt(v6only)); err != nil {
			unix.Close(s)
			return nil, nil, os.NewSyscallError("setsockopt", err)
		}
	}
	if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(s)
		return nil, nil, os.NewSyscallError("setsockopt", err)
	}
	if err := unix.Bind(s, sa); err != nil {
		unix.Close(s)
		return nil, nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(s, backlog()); err != nil {
		unix.Close(s)
		return nil, nil, os.NewSyscallError("listen", err)
	}
	bound := laddr
	if lsa, err := unix.Getsockname(s); err == nil {
		bound = sockaddrToTCP(lsa)
	}
	fd, err := newFD(s)
	if err != nil {
		return nil, nil, err
	}
	return fd, bound, nil
}

func sysDial(ctx context.Context, network string, raddr *net.TCPAddr) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
	family := unix.AF_INET6
	if raddr.IP.To4() != nil && network != "tcp6" {
		family = unix.AF_INET
	}
	sa, err := sockaddr(family, raddr)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := sysSocket(family)
	if err != nil {
		return nil, nil, nil, err
	}
	unix.SetsockoptInt(s, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	fd, err := newFD(s)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := fd.connect(ctx, sa); err != nil {
		fd.close()
		return nil, nil, nil, err
	}
	laddr, peer := fd.addrs()
	if peer == nil {
		peer = raddr
	}
	return fd, laddr, peer, nil
}

// connect connects the socket, parking until the connection is made.
func (fd *netFD) connect(ctx context.Context, sa unix.Sockaddr) error {
	pd := fd.pd
	if err := ctx.Err(); err != nil {
		return err
	}
	seq := pd.w.seq.Load()
	switch err := unix.Connect(pd.fd, sa); err {
	case nil, unix.EISCONN:
		return nil
	case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
	default:
		return os.NewSyscallError("connect", err)
	}
	for {
		if err := pd.wait(&pd.w, seq, ctx); err != nil {
			return err
		}
		seq = pd.w.seq.Load()
		nerr, err := unix.GetsockoptInt(pd.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return os.NewSyscallError("getsockopt", err)
		}
		switch e := unix.Errno(nerr); e {
		case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
		case unix.EISCONN:
			return nil
		case 0:
			// Writable without an error: connected, unless the wake-up
			// was spurious.
			if _, err := unix.Getpeername(pd.fd); err == nil {
				return nil
			}
		default:
			return os.NewSyscallError("connect", e)
		}
	}
}

func (fd *netFD) addrs() (laddr, raddr *net.TCPAddr) {
	if sa, err := unix.Getsockname(fd.pd.fd); err == nil {
		laddr = sockaddrToTCP(sa)
	}
	if sa, err := unix.Getpeername(fd.pd.fd); err == nil {
		raddr = sockaddrToTCP(sa)
	}
	return laddr, raddr
}

func (fd *netFD) accept() (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return nil, nil, nil, err
	}
	var (
		s   int
		rsa unix.Sockaddr
		err error
	)
	for {
		if err = pd.check(&pd.r); err != nil {
			break
		}
		seq := pd.r.seq.Load()
		s, rsa, err = unix.Accept4(pd.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == nil {
			break
		}
		switch err {
		case unix.EINTR, unix.ECONNABORTED:
			continue
		case unix.EAGAIN:
			if err = pd.wait(&pd.r, seq, nil); err == nil {
				continue
			}
		default:
			err = os.NewSyscallError("accept4", err)
		}
		break
	}
	pd.decref()
	runtime.KeepAlive(fd)
	if err != nil {
		return nil, nil, nil, err
	}
	unix.SetsockoptInt(s, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	nfd, err := newFD(s)
	if err != nil {
		return nil, nil, nil, err
	}
	laddr, raddr := nfd.addrs()
	if rsa != nil {
		raddr = sockaddrToTCP(rsa)
	}
	return nfd, laddr, raddr, nil
}

func (fd *netFD) read(p []byte) (int, error) {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return 0, err
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	var (
		n   int
		err error
	)
	for {
		if len(p) == 0 {
			break // at once, as package net's, past a deadline too
		}
		if err = pd.check(&pd.r); err != nil {
			break
		}
		seq := pd.r.seq.Load()
		n, err = unix.Read(pd.fd, p)
		if err == nil {
			if n == 0 {
				err = io.EOF
			}
			break
		}
		n = 0
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			if err = pd.wait(&pd.r, seq, nil); err != nil {
				break
			}
			continue
		}
		err = os.NewSyscallError("read", err)
		break
	}
	pd.decref()
	runtime.KeepAlive(fd)
	return n, err
}

func (fd *netFD) write(p []byte) (int, error) {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return 0, err
	}
	if err := pd.writeLock(); err != nil {
		pd.decref()
		return 0, err
	}
	var (
		nn  int
		err error
	)
	for {
		if err = pd.check(&pd.w); err != nil {
			break
		}
		if nn == len(p) {
			break
		}
		chunk := p[nn:]
		if len(chunk) > maxRW {
			chunk = chunk[:maxRW]
		}
		seq := pd.w.seq.Load()
		n, werr := unix.Write(pd.fd, chunk)
		if n > 0 {
			nn += n
		}
		if werr == nil {
			if n == 0 {
				err = io.ErrUnexpectedEOF
				break
			}
			if nn == len(p) {
				// All written: done, whatever the deadline or a Close
				// did meanwhile (as package net; only a write with
				// bytes left checks them again).
				break
			}
			continue
		}
		if werr == unix.EINTR {
			continue
		}
		if werr == unix.EAGAIN {
			if err = pd.wait(&pd.w, seq, nil); err != nil {
				break
			}
			continue
		}
		err = os.NewSyscallError("write", werr)
		break
	}
	pd.writeUnlock()
	pd.decref()
	runtime.KeepAlive(fd)
	return nn, err
}

func (fd *netFD) close() error {
	fd.cleanup.Stop()
	return fd.pd.close()
}

func (fd *netFD) shutdown(how int) error {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return err
	}
	h := unix.SHUT_RD
	if how == shutWrite {
		h = unix.SHUT_WR
	}
	err := unix.Shutdown(pd.fd, h)
	pd.decref()
	runtime.KeepAlive(fd)
	if err != nil {
		return os.NewSyscallError("shutdown", err)
	}
	return nil
}

func (fd *netFD) setDeadline(t time.Time, read, write bool) error {
	pd := fd.pd
	if err := pd.incref(); err != nil {
		return err
	}
	var ws []*waiter
	pd.mu.Lock()
	if read {
		ws = append(ws, pd.setDeadline(&pd.r, t)...)
	}
	if write {
		ws = append(ws, pd.setDeadline(&pd.w, t)...)
	}
	pd.mu.Unlock()
	wakeAll(ws)
	pd.decref()
	runtime.KeepAlive(fd)
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sockaddr converts a to a socket address of the family.
func sockaddr(family int, a *net.TCPAddr) (unix.Sockaddr, error) {
	switch family {
	case unix.AF_INET:
		sa := &unix.SockaddrInet4{Port: a.Port}
		if a.IP != nil {
			ip := a.IP.To4()
			if ip == nil {
				return nil, &net.AddrError{Err: "non-IPv4 address", Addr: a.IP.String()}
			}
			copy(sa.Addr[:], ip)
		}
		return sa, nil
	default:
		sa := &unix.SockaddrInet6{Port: a.Port}
		if a.IP != nil && !a.IP.Equal(net.IPv4zero) {
			ip := a.IP.To16()
			if ip == nil {
				return nil, &net.AddrError{Err: "non-IPv6 address", Addr: a.IP.String()}
			}
			copy(sa.Addr[:], ip)
		}
		if a.Zone != "" {
			if n, err := strconv.ParseUint(a.Zone, 10, 32); err == nil {
				sa.ZoneId = uint32(n)
			} else if ifi, err := net.InterfaceByName(a.Zone); err == nil {
				sa.ZoneId = uint32(ifi.Index)
			} else {
				return nil, &net.AddrError{Err: "unknown zone", Addr: a.Zone}
			}
		}
		return sa, nil
	}
}

// sockaddrToTCP converts a socket address to a *net.TCPAddr; a zone is
// named by its interface's name, as package net names it, or by its index
// if no interface has it.
func sockaddrToTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: sa.Port}
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: sa.Port}
		if sa.ZoneId != 0 {
			a.Zone = zones.name(sa.ZoneId)
		}
		return a
	}
	return nil
}

// zoneNames maps interface indexes to names for IPv6 zones, as package
// net's zone cache does: looked up again on a miss, and all of it at
// most zoneTTL after the last full lookup, as interfaces come and go.
type zoneNames struct {
	mu     sync.Mutex
	names  map[uint32]string
	loaded time.Time
}

// zoneTTL is how long zoneNames trusts its interface names (package net
// uses the same).
const zoneTTL = time.Minute

var zones zoneNames

// name returns the name of interface index, or index as a decimal number
// if no interface has it.
func (z *zoneNames) name(index uint32) string {
	z.mu.Lock()
	defer z.mu.Unlock()
	if name, ok := z.names[index]; ok && time.Since(z.loaded) < zoneTTL {
		return name
	}
	// A miss or an old table: reload it, at most once a second on misses
	// (an unknown index must not cost a netlink dump per connection).
	if z.names == nil || time.Since(z.loaded) >= time.Second {
		if ifs, err := net.Interfaces(); err == nil {
			z.names = make(map[uint32]string, len(ifs))
			for _, ifi := range ifs {
				z.names[uint32(ifi.Index)] = ifi.Name
			}
			z.loaded = time.Now()
		}
	}
	if name, ok := z.names[index]; ok {
		return name
	}
	return strconv.FormatUint(uint64(index), 10)
}
