//go:build linux

package vnet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// Error values on a closed connection, next to package net's.
func TestClosedErrors(t *testing.T) {
	leakCheck(t)
	c, _ := pair(t)
	c.Close()
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer nln.Close()
	nc, err := net.Dial("tcp", nln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := nln.Accept()
	ns.Close()
	nc.Close()
	ntc := nc.(*net.TCPConn)
	type ops struct {
		name string
		v, n func() error
	}
	for _, o := range []ops{
		{"SetDeadline", func() error { return c.SetDeadline(time.Now()) }, func() error { return ntc.SetDeadline(time.Now()) }},
		{"SetReadDeadline", func() error { return c.SetReadDeadline(time.Now()) }, func() error { return ntc.SetReadDeadline(time.Now()) }},
		{"SetWriteDeadline", func() error { return c.SetWriteDeadline(time.Now()) }, func() error { return ntc.SetWriteDeadline(time.Now()) }},
		{"CloseRead", c.CloseRead, ntc.CloseRead},
		{"CloseWrite", c.CloseWrite, ntc.CloseWrite},
		{"Close", c.Close, ntc.Close},
		{"Read", func() error { _, err := c.Read(make([]byte, 1)); return err }, func() error { _, err := ntc.Read(make([]byte, 1)); return err }},
		{"Read0", func() error { _, err := c.Read(nil); return err }, func() error { _, err := ntc.Read(nil); return err }},
		{"Write", func() error { _, err := c.Write([]byte("x")); return err }, func() error { _, err := ntc.Write([]byte("x")); return err }},
		{"Write0", func() error { _, err := c.Write(nil); return err }, func() error { _, err := ntc.Write(nil); return err }},
		{"SetNoDelay", func() error { return c.SetNoDelay(true) }, func() error { return ntc.SetNoDelay(true) }},
		{"SetLinger", func() error { return c.SetLinger(1) }, func() error { return ntc.SetLinger(1) }},
		{"SetKeepAlive", func() error { return c.SetKeepAlive(true) }, func() error { return ntc.SetKeepAlive(true) }},
		{"SetKeepAlivePeriod", func() error { return c.SetKeepAlivePeriod(time.Second) }, func() error { return ntc.SetKeepAlivePeriod(time.Second) }},
		{"SetReadBuffer", func() error { return c.SetReadBuffer(4096) }, func() error { return ntc.SetReadBuffer(4096) }},
		{"ReadFrom", func() error { _, err := c.ReadFrom(eofR{}); return err }, func() error { _, err := ntc.ReadFrom(eofR{}); return err }},
		{"ReadFromData", func() error { _, err := c.ReadFrom(oneR{}); return err }, func() error { _, err := ntc.ReadFrom(oneR{}); return err }},
		{"WriteTo", func() error { _, err := c.WriteTo(io.Discard); return err }, func() error { _, err := ntc.WriteTo(io.Discard); return err }},
	} {
		ve, ne := o.v(), o.n()
		vo, no := new(net.OpError), new(net.OpError)
		vok, nok := errors.As(ve, &vo), errors.As(ne, &no)
		// The same errors.Is answers and operation; package net names
		// ReadFrom's and WriteTo's "readfrom" and "writeto" around the
		// inner error, vnet the connection that failed (its doc), and
		// its Source and Addr vary from method to method.
		same := vok == nok && errors.Is(ve, net.ErrClosed) == errors.Is(ne, net.ErrClosed)
		if vok && nok && o.name != "ReadFromData" && o.name != "WriteTo" {
			same = same && vo.Op == no.Op
		}
		if !same {
			t.Errorf("%s on a closed conn: vnet %#v, net %#v", o.name, ve, ne)
		}
	}
}

type eofR struct{}

func (eofR) Read([]byte) (int, error) { return 0, io.EOF }

type oneR struct{}

func (oneR) Read(p []byte) (int, error) { p[0] = 1; return 1, nil }

// CloseRead wakes a parked Read (io.EOF), CloseWrite a parked Write, as on net.
func TestHalfCloseWakesParked(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, _ := pair(t)
		d, _ := pair(t)
		r0, w0 := vnet.ParkCounts()
		rd := r.start(t, func() error { _, err := c.Read(make([]byte, 1)); return err })
		wr := r.start(t, func() error { _, err := d.Write(make([]byte, 64<<20)); return err })
		waitReadParked(r0)
		waitWriteParked(w0)
		if err := c.CloseRead(); err != nil {
			t.Fatal(err)
		}
		if err := d.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "Read", rd); err != io.EOF {
			t.Errorf("Read parked when CloseRead: %v, want io.EOF", err)
		}
		if err := within(t, "Write", wr); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("Write parked when CloseWrite: %v, want EPIPE", err)
		}
	})
}

// A scheduler whose Shutdown gives up with a virtual thread parked in
// Read: closing the connection still wakes it and Close returns.
func TestCloseAfterShutdownGaveUp(t *testing.T) {
	leakCheck(t)
	c, _ := pair(t)
	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r0, _ := vnet.ParkCounts()
	vt := goVT(t, s, func() error { _, err := c.Read(make([]byte, 1)); return err })
	waitReadParked(r0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := within(t, "Close", c.Close); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "Join", vt.Join); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("parked Read: %v", err)
	}
	if err := within(t, "Shutdown", func() error { return s.Shutdown(context.Background()) }); err != nil {
		t.Fatal(err)
	}
	// A goroutine can still use the other connections.
	a, b := pair(t)
	go a.Write([]byte("x"))
	if _, err := io.ReadFull(b, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}
