package vnet_test

import (
	"errors"
	"io"
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
			if !errors.Is(err, syscall.EINVAL) {
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
		if _, err := l.Accept(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Accept = %v, want syscall.EINVAL", err)
		}
		if _, err := l.AcceptTCP(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("AcceptTCP = %v, want syscall.EINVAL", err)
		}
		if err := l.SetDeadline(time.Now()); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetDeadline = %v, want syscall.EINVAL", err)
		}
		if _, err := l.SyscallConn(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SyscallConn = %v, want syscall.EINVAL", err)
		}
		if err := l.Close(); !errors.Is(err, syscall.EINVAL) {
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
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	c, err := vnet.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadFrom(new(vnet.Conn)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ReadFrom(zero Conn) = %v, want syscall.EINVAL", err)
	}
	if _, err := c.ReadFrom(&io.LimitedReader{R: (*vnet.Conn)(nil), N: 10}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ReadFrom(LimitedReader over a nil Conn) = %v, want syscall.EINVAL", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
