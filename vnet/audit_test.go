//go:build linux

package vnet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// The poller's goroutine serves every socket of the process: it must not
// carry the profiler labels of whoever happened to open the first one,
// which CPU and goroutine profiles would charge all of vnet's readiness
// dispatch to, for as long as any socket stays open.
func TestAuditPollerLabels(t *testing.T) {
	leakCheck(t)
	for deadline := time.Now().Add(5 * time.Second); vnet.PollerActive() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if vnet.PollerActive() {
		t.Skip("a poller still runs: the first socket would not be this test's")
	}
	var ln *vnet.Listener
	pprof.Do(context.Background(), pprof.Labels("vnet_audit", "first_socket"), func(context.Context) {
		var err error
		if ln, err = vnet.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	})
	defer ln.Close()
	// The loop's record, once it waits for events (past its start).
	var rec string
	for deadline := time.Now().Add(5 * time.Second); rec == "" && time.Now().Before(deadline); {
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		for _, r := range strings.Split(b.String(), "\n\n") {
			if strings.Contains(r, "vnet.(*poller).loop+") && (strings.Contains(r, "RawRead") || strings.Contains(r, "EpollWait")) {
				rec = r
			}
		}
		time.Sleep(time.Millisecond)
	}
	if rec == "" {
		t.Fatal("no poller goroutine waiting for events in the goroutine profile")
	}
	if strings.Contains(rec, "vnet_audit") {
		t.Errorf("the poller's goroutine has the labels of the goroutine that opened the first socket:\n%s", rec)
	}
}

// A Write waiting for its turn behind a splicing ReadFrom that is parked
// on its source (which holds the write lock, so that their bytes do not
// interleave) still honours the write deadline, as net.Conn's
// SetWriteDeadline promises for "any currently-blocked Write call": it
// used to wait, past its deadline, for as long as the source stayed
// silent.
func TestAuditWriteBehindSpliceDeadline(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t) // b is the splice's source; a stays silent
		c, _ := pair(t) // c is its destination
		r0, _ := vnet.ParkCounts()
		splice := r.start(t, func() error {
			n, err := c.ReadFrom(b)
			if n != 0 || err != nil {
				return fmt.Errorf("ReadFrom = %d, %v; want 0, nil at the source's end", n, err)
			}
			return nil
		})
		waitReadParked(r0) // the splice waits on b, holding c's write lock
		bounded := func(what string, wait func() error) error {
			t.Helper()
			ch := make(chan error, 1)
			go func() { ch <- wait() }()
			select {
			case err := <-ch:
				return err
			case <-time.After(5 * time.Second):
				c.Close() // unblocks it
				<-ch
				t.Fatalf("%s: still waiting for its turn 5s after its deadline", what)
				return nil
			}
		}
		// The deadline's timer fires while the Write waits.
		c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		wr := r.start(t, func() error { _, err := c.Write([]byte("x")); return err })
		if err := bounded("Write", wr); !isTimeout(err) {
			t.Errorf("Write behind a parked splice, past its deadline: %v, want a timeout", err)
		}
		// The deadline moved to the past while the Write waits (or
		// before it queues).
		c.SetWriteDeadline(time.Time{})
		wr = r.start(t, func() error { _, err := c.Write([]byte("y")); return err })
		c.SetWriteDeadline(time.Now().Add(-time.Second))
		if err := bounded("Write", wr); !isTimeout(err) {
			t.Errorf("Write behind a parked splice, deadline moved to the past: %v, want a timeout", err)
		}
		a.Close() // the source's end: the splice returns
		if err := bounded("ReadFrom", splice); err != nil {
			t.Error(err)
		}
	})
}

// waitReadParked waits until some read (Read, Accept, a splice's source)
// has parked since r0.
func waitReadParked(r0 uint64) {
	for r1, _ := vnet.ParkCounts(); r1 == r0; r1, _ = vnet.ParkCounts() {
		time.Sleep(time.Millisecond)
	}
}

// waitWriteParked waits until some write (Write, connect) has parked
// since w0.
func waitWriteParked(w0 uint64) {
	for _, w1 := vnet.ParkCounts(); w1 == w0; _, w1 = vnet.ParkCounts() {
		time.Sleep(time.Millisecond)
	}
}

// within returns wait's result, or fails the test if it takes over 10s.
func within(t *testing.T, what string, wait func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- wait() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10s\n%s", what, stacks())
		return nil
	}
}

// Shortening a deadline while an operation is parked wakes it at the new one.
func TestAuditShortenWhileParked(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, _ := pair(t)
		d, _ := pair(t)
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		far := time.Now().Add(time.Hour)
		c.SetReadDeadline(far)
		d.SetWriteDeadline(far)
		ln.SetDeadline(far)
		r0, w0 := vnet.ParkCounts()
		rd := r.start(t, func() error { _, err := c.Read(make([]byte, 1)); return err })
		wr := r.start(t, func() error { _, err := d.Write(make([]byte, 64<<20)); return err })
		waitReadParked(r0)
		waitWriteParked(w0)
		r1, _ := vnet.ParkCounts()
		ac := r.start(t, func() error { _, err := ln.Accept(); return err })
		waitReadParked(r1)
		soon := time.Now().Add(20 * time.Millisecond)
		c.SetReadDeadline(soon)
		d.SetWriteDeadline(soon)
		ln.SetDeadline(soon)
		for name, w := range map[string]func() error{"Read": rd, "Write": wr, "Accept": ac} {
			if err := within(t, name, w); !isTimeout(err) {
				t.Errorf("%s with its deadline shortened while parked: %v, want a timeout", name, err)
			}
		}
	})
}

// Clearing a deadline while parked keeps the operation waiting for data.
func TestAuditClearWhileParked(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, srv := pair(t)
		c.SetReadDeadline(time.Now().Add(time.Hour))
		r0, _ := vnet.ParkCounts()
		rd := r.start(t, func() error {
			b := make([]byte, 1)
			_, err := c.Read(b)
			if err == nil && b[0] != 'x' {
				err = fmt.Errorf("read %q", b)
			}
			return err
		})
		waitReadParked(r0)
		c.SetReadDeadline(time.Time{})
		c.SetReadDeadline(time.Now().Add(time.Hour))
		c.SetReadDeadline(time.Time{})
		srv.Write([]byte("x"))
		if err := within(t, "Read", rd); err != nil {
			t.Fatal(err)
		}
	})
}

// Error values on a closed connection, next to package net's.
func TestAuditClosedErrors(t *testing.T) {
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
func TestAuditHalfCloseWakesParked(t *testing.T) {
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
func TestAuditShutdownParkedRead(t *testing.T) {
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

// openFDs returns the process's open descriptors' numbers.
func openFDs(t *testing.T) map[int]bool {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	self := int(f.Fd())
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]bool{}
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil && v != self {
			m[v] = true
		}
	}
	return m
}

// limitFDs lets the process open exactly free more descriptors (filling
// any holes below the limit with /dev/null) and returns a function that
// undoes it.
func limitFDs(t *testing.T, free int) (undo func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	open := openFDs(t)
	top := 0
	for fd := range open {
		top = max(top, fd)
	}
	var fillers []int
	for fd := 0; fd < top; fd++ {
		if !open[fd] {
			f, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			fillers = append(fillers, f)
		}
	}
	lim := old
	lim.Cur = uint64(top + 1 + free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
		for _, f := range fillers {
			syscall.Close(f)
		}
	}
}

// Running out of descriptors at each step of a Dial, an Accept and a
// splice leaks none and leaves no poller behind.
func TestAuditEMFILE(t *testing.T) {
	leakCheck(t)
	// Dial starts the poller, whose descriptors the first steps count.
	for deadline := time.Now().Add(5 * time.Second); vnet.PollerActive() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer nln.Close()
	addr := nln.Addr().String()
	for free := range 5 {
		before := len(openFDs(t))
		undo := limitFDs(t, free)
		c, err := vnet.Dial("tcp", addr)
		undo()
		t.Logf("free %d: %v", free, err)
		if err == nil {
			c.Close()
		} else if !errors.Is(err, syscall.EMFILE) {
			t.Errorf("Dial with %d descriptors free: %v, want EMFILE", free, err)
		}
		// The poller's loop closes its own descriptors as it exits.
		after := len(openFDs(t))
		for deadline := time.Now().Add(5 * time.Second); after != before && time.Now().Before(deadline); after = len(openFDs(t)) {
			time.Sleep(time.Millisecond)
		}
		if after != before {
			t.Errorf("Dial with %d descriptors free: %d descriptors open, %d before", free, after, before)
		}
		if vnet.PollerActive() {
			t.Errorf("Dial with %d descriptors free: the poller runs", free)
		}
	}
	// Accept.
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	before := len(openFDs(t))
	undo := limitFDs(t, 0)
	_, err = ln.Accept()
	undo()
	if !errors.Is(err, syscall.EMFILE) {
		t.Errorf("Accept with no descriptor free: %v, want EMFILE", err)
	}
	if after := len(openFDs(t)); after != before {
		t.Errorf("Accept: %d descriptors open, %d before", after, before)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	// A splice with no descriptor for its pipe copies through a buffer.
	a, b := pair(t)
	sc2, nc2 := sc.(*vnet.Conn), nc
	go func() { a.Write([]byte("hello")); a.Close() }()
	undo = limitFDs(t, 0)
	n, err := sc2.ReadFrom(b)
	undo()
	if n != 5 || err != nil {
		t.Errorf("ReadFrom without a pipe: %d, %v", n, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(nc2, got); err != nil || string(got) != "hello" {
		t.Errorf("read %q, %v", got, err)
	}
	sc2.Close()
}

// A virtual thread of a deterministic scheduler parked in Read is woken
// by the poller (from outside the simulation) and by its deadline.
func TestAuditDeterministic(t *testing.T) {
	leakCheck(t)
	c, srv := pair(t)
	s := newSched(t, scheduler.Options{Deterministic: true, Seed: 1})
	vt := goVT(t, s, func() error {
		b := make([]byte, 1)
		_, err := c.Read(b)
		if err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err = c.Read(b)
		if !isTimeout(err) {
			return fmt.Errorf("want timeout: %v", err)
		}
		return nil
	})
	srv.Write([]byte("x"))
	if err := within(t, "Join", vt.Join); err != nil {
		t.Fatal(err)
	}
}
