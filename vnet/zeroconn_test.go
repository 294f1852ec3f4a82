package vnet_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/vnet"
)

// The methods of a nil or zero Conn or Listener return syscall.EINVAL (the
// address methods nil), as a *net.TCPConn's and a *net.TCPListener's do,
// rather than panic.
func TestZeroConnAndListener(t *testing.T) {
	for _, c := range []*vnet.Conn{nil, new(vnet.Conn)} {
		check := func(what string, err error) {
			t.Helper()
			if err != syscall.EINVAL { // bare, as package net's
				t.Errorf("%T(%p).%s = %v, want syscall.EINVAL", c, c, what, err)
			}
		}
		_, err := c.Read(make([]byte, 1))
		check("Read", err)
		_, err = c.Write([]byte("x"))
		check("Write", err)
		check("SetDeadline", c.SetDeadline(time.Now()))
		check("SetReadDeadline", c.SetReadDeadline(time.Now()))
		check("SetWriteDeadline", c.SetWriteDeadline(time.Now()))
		check("CloseRead", c.CloseRead())
		check("CloseWrite", c.CloseWrite())
		check("SetNoDelay", c.SetNoDelay(true))
		check("SetKeepAlive", c.SetKeepAlive(true))
		check("SetKeepAlivePeriod", c.SetKeepAlivePeriod(time.Second))
		check("SetLinger", c.SetLinger(0))
		check("SetReadBuffer", c.SetReadBuffer(1024))
		check("SetWriteBuffer", c.SetWriteBuffer(1024))
		_, err = c.SyscallConn()
		check("SyscallConn", err)
		_, err = c.ReadFrom(eofReader{})
		check("ReadFrom", err)
		_, err = c.WriteTo(io.Discard)
		check("WriteTo", err)
		check("Close", c.Close())
		if a := c.LocalAddr(); a != nil {
			t.Errorf("LocalAddr() = %#v, want nil", a)
		}
		if a := c.RemoteAddr(); a != nil {
			t.Errorf("RemoteAddr() = %#v, want nil", a)
		}
	}
	for _, l := range []*vnet.Listener{nil, new(vnet.Listener)} {
		if _, err := l.Accept(); err != syscall.EINVAL {
			t.Errorf("Accept = %v, want syscall.EINVAL", err)
		}
		if _, err := l.AcceptTCP(); err != syscall.EINVAL {
			t.Errorf("AcceptTCP = %v, want syscall.EINVAL", err)
		}
		if err := l.SetDeadline(time.Now()); err != syscall.EINVAL {
			t.Errorf("SetDeadline = %v, want syscall.EINVAL", err)
		}
		if _, err := l.SyscallConn(); err != syscall.EINVAL {
			t.Errorf("SyscallConn = %v, want syscall.EINVAL", err)
		}
		if err := l.Close(); err != syscall.EINVAL {
			t.Errorf("Close = %v, want syscall.EINVAL", err)
		}
		if a := l.Addr(); a != nil {
			t.Errorf("Addr() = %#v, want nil", a)
		}
	}
}

// A zero Conn as the source of a splice fails as its Read would, and
// leaves the destination usable.
func TestSpliceFromZeroConn(t *testing.T) {
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("needs a TCP listener on 127.0.0.1: %v", err)
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	peer := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		peer <- accepted{c, err}
	}()
	c, err := vnet.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := <-peer
	if p.err != nil {
		t.Fatal(p.err)
	}
	defer p.c.Close()
	if _, err := c.ReadFrom(new(vnet.Conn)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ReadFrom(zero Conn) = %v, want syscall.EINVAL", err)
	}
	if _, err := c.ReadFrom(&io.LimitedReader{R: (*vnet.Conn)(nil), N: 10}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ReadFrom(LimitedReader over a nil Conn) = %v, want syscall.EINVAL", err)
	}
	if _, err := c.Write([]byte("still")); err != nil {
		t.Fatalf("Write after the failed splices: %v", err)
	}
	p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(p.c, buf); err != nil || string(buf) != "still" {
		t.Fatalf("the peer read %q, %v; want \"still\"", buf, err)
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
