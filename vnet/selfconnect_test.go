//go:build linux

package vnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// fakeDials replaces sysDialFunc for the test with one that dials for
// real and then lets bend rewrite the result of call i (from 0).
func fakeDials(t *testing.T, bend func(i int, fd *netFD, laddr, raddr *net.TCPAddr, err error) (*netFD, *net.TCPAddr, *net.TCPAddr, error)) *int {
	calls := new(int)
	real := sysDialFunc
	sysDialFunc = func(ctx context.Context, network string, ra *net.TCPAddr) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
		fd, laddr, raddr, err := real(ctx, network, ra)
		i := *calls
		*calls++
		return bend(i, fd, laddr, raddr, err)
	}
	t.Cleanup(func() { sysDialFunc = real })
	return calls
}

// loopback listens on a free port of 127.0.0.1.
func loopback(t *testing.T) *Listener {
	t.Helper()
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// selfConnected makes a dial that succeeded look connected to itself: its
// local address is its remote one.
func selfConnected(fd *netFD, raddr *net.TCPAddr) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
	self := *raddr
	return fd, &self, raddr, nil
}

// acceptClosed accepts the next connection on ln and checks that the
// dialling side has closed it: the peer reads the end of the stream.
func acceptClosed(t *testing.T, ln *Listener, what string) {
	t.Helper()
	p, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := p.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("%s was not closed: its peer read %d, %v", what, n, err)
	}
}

// acceptOpen accepts the next connection on ln and checks that it is c's:
// a byte c writes arrives.
func acceptOpen(t *testing.T, ln *Listener, c *Conn, what string) {
	t.Helper()
	p, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	p.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := p.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("the connection Dial returned is not %s: its peer read %d, %v", what, n, err)
	}
}

// A dial that connects the socket to itself is closed and dialled again,
// as package net does: the connection Dial returns is the second one, and
// the first is closed (its peer reads the end of the stream).
func TestDialRetriesSelfConnect(t *testing.T) {
	ln := loopback(t)
	calls := fakeDials(t, func(i int, fd *netFD, laddr, raddr *net.TCPAddr, err error) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
		if i == 0 && err == nil {
			return selfConnected(fd, raddr)
		}
		return fd, laddr, raddr, err
	})
	c, err := Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if *calls != 2 {
		t.Fatalf("%d dials, want 2", *calls)
	}
	acceptClosed(t, ln, "the self-connected dial")
	acceptOpen(t, ln, c, "the second")
}

// Three self-connected dials in a row: the third stands, as in package net.
func TestDialSelfConnectRelents(t *testing.T) {
	ln := loopback(t)
	calls := fakeDials(t, func(i int, fd *netFD, laddr, raddr *net.TCPAddr, err error) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
		if err != nil {
			return fd, laddr, raddr, err
		}
		return selfConnected(fd, raddr)
	})
	c, err := Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if *calls != 3 {
		t.Fatalf("%d dials, want 3", *calls)
	}
	// The two given up are closed; the third is the one Dial returned.
	acceptClosed(t, ln, "dial 0, given up,")
	acceptClosed(t, ln, "dial 1, given up,")
	acceptOpen(t, ln, c, "the third")
}

// A context that ends while a self-connected dial is given up ends the
// dial with the context's error, and leaves no socket open.
func TestDialSelfConnectContextEnds(t *testing.T) {
	ln := loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fakeDials(t, func(i int, fd *netFD, laddr, raddr *net.TCPAddr, err error) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
		if err != nil {
			return fd, laddr, raddr, err
		}
		cancel() // before the retry
		return selfConnected(fd, raddr)
	})
	if _, err := DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.Canceled) {
		t.Fatalf("DialContext = %v, want context.Canceled", err)
	}
	// The given-up socket's end of the stream shows it closed: counting
	// the process's descriptors instead would count those that other
	// tests' connections, closed by the collector, free meanwhile.
	acceptClosed(t, ln, "the given-up socket")
}

// EADDRNOTAVAIL is dialled again too; after three the error stands.
func TestDialRetriesAddrNotAvail(t *testing.T) {
	ln := loopback(t)
	notAvail := &os.SyscallError{Syscall: "connect", Err: syscall.EADDRNOTAVAIL}
	failFirst := 1
	calls := fakeDials(t, func(i int, fd *netFD, laddr, raddr *net.TCPAddr, err error) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
		if i < failFirst && err == nil {
			fd.close()
			return nil, nil, nil, notAvail
		}
		return fd, laddr, raddr, err
	})
	c, err := Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("a dial that failed once with EADDRNOTAVAIL was not tried again: %v", err)
	}
	c.Close()
	if *calls != 2 {
		t.Fatalf("%d dials, want 2", *calls)
	}
	*calls, failFirst = 0, 10
	if _, err := Dial("tcp", ln.Addr().String()); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Fatalf("Dial = %v, want EADDRNOTAVAIL after three tries", err)
	}
	if *calls != 3 {
		t.Fatalf("%d dials, want 3", *calls)
	}
}

func TestSelfConnect(t *testing.T) {
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	b := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5001}
	a4 := &net.TCPAddr{IP: net.IP{127, 0, 0, 1}, Port: 5000} // 4 bytes; a's are 16
	for _, tc := range []struct {
		laddr, raddr *net.TCPAddr
		err          error
		want         bool
	}{
		{a, a, nil, true},
		{a4, a, nil, true}, // the same address, in its 4- and 16-byte forms
		{a, b, nil, false},
		{a, a, syscall.ECONNREFUSED, false},
		{nil, a, nil, true},
		{a, nil, nil, true},
	} {
		if got := selfConnect(tc.laddr, tc.raddr, tc.err); got != tc.want {
			t.Errorf("selfConnect(%v, %v, %v) = %v, want %v", tc.laddr, tc.raddr, tc.err, got, tc.want)
		}
	}
}
