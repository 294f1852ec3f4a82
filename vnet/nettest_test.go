//go:build linux

package vnet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// x/net/nettest's TestConn is the Go team's conformance suite for net.Conn
// implementations: basic and ping-pong I/O, racing reads and writes, read
// and write deadlines in the past, present and future, Close unblocking a
// pending operation, and every method called concurrently.

// nettestPipe makes a pair of connected Conns over 127.0.0.1; wrap, if not
// nil, wraps each.
func nettestPipe(wrap func(net.Conn) net.Conn) nettest.MakePipe {
	return func() (c1, c2 net.Conn, stop func(), err error) {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		defer ln.Close()
		type accepted struct {
			c   net.Conn
			err error
		}
		acc := make(chan accepted, 1)
		go func() {
			c, err := ln.Accept()
			acc <- accepted{c, err}
		}()
		d, err := vnet.Dial("tcp", ln.Addr().String())
		if err != nil {
			return nil, nil, nil, err
		}
		a := <-acc
		if a.err != nil {
			d.Close()
			return nil, nil, nil, a.err
		}
		c1, c2 = d, a.c
		if wrap != nil {
			c1, c2 = wrap(c1), wrap(c2)
		}
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	}
}

// TestNettestConn runs the suite with the Conns used from the suite's own
// goroutines, which block in each operation.
func TestNettestConn(t *testing.T) {
	nettest.TestConn(t, nettestPipe(nil))
}

// TestNettestConnVThreads runs the suite with every operation of the
// Conns run by a virtual thread, which parks where a goroutine would
// block, while the suite's goroutine waits for it in Join: the suite's
// concurrent readers, writers, closers and deadline setters become
// concurrent virtual threads, on two carriers and on one (where each
// must park for the others to run).
func TestNettestConnVThreads(t *testing.T) {
	for _, carriers := range []int{2, 1} {
		t.Run(fmt.Sprintf("carriers=%d", carriers), func(t *testing.T) {
			s := newSched(t, scheduler.Options{Carriers: carriers})
			nettest.TestConn(t, nettestPipe(func(c net.Conn) net.Conn { return &vthreadConn{c, s} }))
		})
	}
}

// vthreadConn runs each method of its Conn in a virtual thread of s.
type vthreadConn struct {
	net.Conn
	s *scheduler.Scheduler
}

// in runs f in a virtual thread and waits for it; once the scheduler is
// shut down (the suite's last goroutines may still use a Conn after the
// test ends), on the calling goroutine.
func (c *vthreadConn) in(f func()) {
	vt, err := c.s.Go(func(context.Context) error { f(); return nil })
	if errors.Is(err, scheduler.ErrClosed) {
		f()
		return
	}
	if err != nil {
		panic(err)
	}
	if err := vt.Join(); err != nil {
		panic(err)
	}
}

func (c *vthreadConn) Read(b []byte) (n int, err error) {
	c.in(func() { n, err = c.Conn.Read(b) })
	return n, err
}

func (c *vthreadConn) Write(b []byte) (n int, err error) {
	c.in(func() { n, err = c.Conn.Write(b) })
	return n, err
}

func (c *vthreadConn) Close() (err error) {
	c.in(func() { err = c.Conn.Close() })
	return err
}

func (c *vthreadConn) SetDeadline(d time.Time) (err error) {
	c.in(func() { err = c.Conn.SetDeadline(d) })
	return err
}

func (c *vthreadConn) SetReadDeadline(d time.Time) (err error) {
	c.in(func() { err = c.Conn.SetReadDeadline(d) })
	return err
}

func (c *vthreadConn) SetWriteDeadline(d time.Time) (err error) {
	c.in(func() { err = c.Conn.SetWriteDeadline(d) })
	return err
}
