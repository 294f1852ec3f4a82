//go:build linux

package vnet_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// TestConcurrentWritesAtomic: two Writes issued at once on one
// connection, each larger than the socket buffers can take. A
// *net.TCPConn holds its write lock for the whole Write, so the peer reads
// one writer's bytes and then the other's (the net subtest checks the
// test on it); so must a vnet Conn, whose Writes park on a full send
// buffer: without the lock, the other Write would go in meanwhile and the
// bytes of the two calls interleave.
func TestConcurrentWritesAtomic(t *testing.T) {
	const size = 4 << 20
	check := func(t *testing.T, c, srv net.Conn, start func(func() error) func() error) {
		a := bytes.Repeat([]byte{'a'}, size)
		b := bytes.Repeat([]byte{'b'}, size)
		wa := start(func() error { _, err := c.Write(a); return err })
		wb := start(func() error { _, err := c.Write(b); return err })
		time.Sleep(50 * time.Millisecond) // both Writes fill the buffers and wait
		got := make([]byte, 2*size)
		if _, err := io.ReadFull(srv, got); err != nil {
			t.Fatal(err)
		}
		if err := wa(); err != nil {
			t.Fatal(err)
		}
		if err := wb(); err != nil {
			t.Fatal(err)
		}
		runs := 1
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1] {
				runs++
			}
		}
		if runs != 2 {
			t.Errorf("the two concurrent Writes interleaved: %d runs of bytes, want 2 (one per Write)", runs)
		}
	}
	t.Run("net", func(t *testing.T) { // the reference behaviour
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ch := make(chan net.Conn, 1)
		go func() { s, _ := ln.Accept(); ch <- s }()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		srv := <-ch
		defer srv.Close()
		check(t, c, srv, runner{}.startFn(t))
	})
	modes(t, func(t *testing.T, r runner) {
		for round := 0; round < 10 && !t.Failed(); round++ {
			c, srv := pair(t)
			check(t, c, srv, r.startFn(t))
			c.Close()
			srv.Close()
		}
	})
}

func (r runner) startFn(t *testing.T) func(func() error) func() error {
	return func(fn func() error) func() error { return r.start(t, fn) }
}

// TestParkedReadSurvivesGC: a virtual thread parked in Read holds
// the only reference to its connection; collections while it is parked
// must not close the connection under it.
func TestParkedReadSurvivesGC(t *testing.T) {
	leakCheck(t)
	s := newSched(t, scheduler.Options{})
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	r0, _ := vnet.ParkCounts()
	conns := make(chan *vnet.Conn, 1)
	vt := goVT(t, s, func() error {
		c, err := vnet.Dial("tcp", addr)
		if err != nil {
			return err
		}
		buf := make([]byte, 8)
		n, err := c.Read(buf)
		conns <- c
		if err != nil {
			return err
		}
		if string(buf[:n]) != "ok" {
			return fmt.Errorf("read %q", buf[:n])
		}
		return nil
	})
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for r1, _ := vnet.ParkCounts(); r1 == r0; r1, _ = vnet.ParkCounts() {
		time.Sleep(time.Millisecond)
	}
	for range 5 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	srv.Write([]byte("ok"))
	err = vt.Join()
	(<-conns).Close()
	if err != nil {
		t.Fatalf("parked Read: %v", err)
	}
}

// TestClosedFDReuse: after Close, the descriptor number is reused by
// a new socket; operations on the closed Conn must fail with ErrClosed and
// never touch the new socket.
func TestClosedFDReuse(t *testing.T) {
	leakCheck(t)
	c, _ := pair(t)
	c.Close()
	c2, srv2 := pair(t)
	_ = c2
	if _, err := c.Write([]byte("stale")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on closed conn: %v", err)
	}
	srv2.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := srv2.Read(make([]byte, 8)); n != 0 || !isTimeout(err) {
		t.Fatalf("the new connection received %d bytes (%v)", n, err)
	}
}
