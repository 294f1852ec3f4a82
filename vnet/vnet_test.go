//go:build linux

package vnet_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/goroutines"
	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// leakCheck records the goroutines and file descriptors of the process
// and, when the test and its other cleanups are over, checks that the
// poller has stopped and both counts are back. Call it first in a test, so
// that its cleanup runs last.
func leakCheck(t *testing.T) {
	t.Helper()
	g0 := goroutines.Settled()
	f0 := countFDs(t)
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for vnet.PollerActive() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if vnet.PollerActive() {
			t.Errorf("the poller still runs after every socket was closed")
		}
		f := countFDs(t)
		for f > f0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			f = countFDs(t)
		}
		if f > f0 {
			t.Errorf("file descriptor leak: %d open, %d before:\n%s", f, f0, listFDs())
		}
		if g := goroutines.Settled(); g > g0 {
			t.Errorf("goroutine leak: %d goroutines, %d before:\n%s", g, g0, stacks())
		}
	})
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func listFDs() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(&b, "  %s -> %s\n", e.Name(), target)
	}
	return b.String()
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// newSched starts a scheduler that the test's cleanup shuts down.
func newSched(t *testing.T, opts scheduler.Options) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, s) })
	return s
}

// shutdown shuts s down, or fails the test if its virtual threads do not
// finish in time (instead of hanging).
func shutdown(t *testing.T, s *scheduler.Scheduler) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("Shutdown hangs: %d virtual threads live\n%s", s.Live(), stacks())
	}
}

func goVT(t *testing.T, s *scheduler.Scheduler, fn func() error) *scheduler.VThread {
	t.Helper()
	vt, err := s.Go(func(context.Context) error { return fn() })
	if err != nil {
		t.Fatal(err)
	}
	return vt
}

// noPins fails the test if virtual threads of s pinned their carriers.
func noPins(t *testing.T, s *scheduler.Scheduler) {
	t.Helper()
	if pins := s.Pins(); len(pins) > 0 {
		t.Errorf("virtual threads pinned their carriers: %+v", pins)
	}
}

// pair returns the two ends of a TCP connection over 127.0.0.1, both
// vnet connections, closed when the test ends.
func pair(t *testing.T) (client, server *vnet.Conn) {
	t.Helper()
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		c   *vnet.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.AcceptTCP()
		ch <- res{c, err}
	}()
	client, err = vnet.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		r.c.Close()
	})
	return client, r.c
}

// runner runs functions in virtual threads of a scheduler, or in plain
// goroutines when s is nil.
type runner struct{ s *scheduler.Scheduler }

// start runs fn and returns a function that waits for its result.
func (r runner) start(t *testing.T, fn func() error) (wait func() error) {
	t.Helper()
	if r.s != nil {
		vt := goVT(t, r.s, fn)
		return vt.Join
	}
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return func() error { return <-ch }
}

// modes runs test as subtests in a virtual thread and in a goroutine.
func modes(t *testing.T, test func(t *testing.T, r runner)) {
	t.Run("vthread", func(t *testing.T) {
		leakCheck(t)
		s := newSched(t, scheduler.Options{})
		test(t, runner{s})
		shutdown(t, s)
		noPins(t, s)
	})
	t.Run("goroutine", func(t *testing.T) {
		leakCheck(t)
		test(t, runner{})
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
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

// TestEcho runs an echo server with a virtual thread per connection, in
// blocking style (io.Copy on half the connections, bufio byte by byte on
// the others), and 1,000 concurrent clients (100 with -short): virtual
// threads and goroutines, over vnet and over package net. Every payload is
// random, some larger than 64 KiB, and is checked byte for byte.
func TestEcho(t *testing.T) {
	leakCheck(t)
	clients, limit := 1000, 90*time.Second
	if testing.Short() {
		clients, limit = 100, 60*time.Second
	}
	r0, w0 := vnet.ParkCounts()
	s := newSched(t, scheduler.Options{})
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()

	var (
		srvMu  sync.Mutex
		srvErr error
		served atomic.Int64
	)
	serve := func(c *vnet.Conn, bytewise bool) error {
		var err error
		if bytewise {
			br, bw := bufio.NewReaderSize(c, 1000), bufio.NewWriterSize(c, 777)
			for {
				var b byte
				if b, err = br.ReadByte(); err != nil {
					break
				}
				if err = bw.WriteByte(b); err != nil {
					break
				}
				if br.Buffered() == 0 {
					if err = bw.Flush(); err != nil {
						break
					}
				}
			}
			if err == io.EOF {
				err = bw.Flush()
			}
		} else {
			_, err = io.Copy(c, c)
		}
		if err == nil {
			err = c.CloseWrite()
		}
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		served.Add(1)
		if err != nil {
			srvMu.Lock()
			if srvErr == nil {
				srvErr = err
			}
			srvMu.Unlock()
		}
		return err
	}
	acceptor := goVT(t, s, func() error {
		for i := 0; ; i++ {
			c, err := ln.AcceptTCP()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return nil
				}
				return err
			}
			bytewise := i%2 == 1
			if _, err := s.Go(func(context.Context) error { return serve(c, bytewise) }); err != nil {
				return err
			}
		}
	})

	// client sends payload on c from a second thread while it reads the
	// echo, so that neither side's buffers fill up for good.
	client := func(r runner, c net.Conn, payload []byte, seed uint64) error {
		rng := rand.New(rand.NewPCG(seed, 1))
		waitW := r.start(t, func() error {
			for p := payload; len(p) > 0; {
				n := len(p)
				if rng.IntN(2) == 0 {
					n = min(n, 1+rng.IntN(100<<10))
				}
				if _, err := c.Write(p[:n]); err != nil {
					return err
				}
				p = p[n:]
			}
			return c.(interface{ CloseWrite() error }).CloseWrite()
		})
		var src io.Reader = c
		if seed%2 == 1 {
			src = bufio.NewReaderSize(c, 4096)
		}
		got, rerr := io.ReadAll(src)
		werr := waitW()
		cerr := c.Close()
		switch {
		case rerr != nil:
			return fmt.Errorf("read: %w", rerr)
		case werr != nil:
			return fmt.Errorf("write: %w", werr)
		case cerr != nil:
			return fmt.Errorf("close: %w", cerr)
		case !bytes.Equal(got, payload):
			return fmt.Errorf("echoed %d bytes, want %d (first difference at %d)", len(got), len(payload), firstDiff(got, payload))
		}
		return nil
	}

	var (
		wg      sync.WaitGroup
		pending atomic.Int64
		errMu   sync.Mutex
		errs    []error
		large   int
	)
	fail := func(i int, err error) {
		errMu.Lock()
		errs = append(errs, fmt.Errorf("client %d: %w", i, err))
		errMu.Unlock()
	}
	for i := range clients {
		size := rand.New(rand.NewPCG(uint64(i), 2)).IntN(16 << 10)
		if i%10 == 0 {
			size = 64<<10 + rand.New(rand.NewPCG(uint64(i), 3)).IntN(1<<20)
			large++
		}
		if i == 1 {
			size = 0
		}
		payload := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)}).Read(payload)
		wg.Add(1)
		pending.Add(1)
		done := func(err error) {
			if err != nil {
				fail(i, err)
			}
			pending.Add(-1)
			wg.Done()
		}
		switch i % 4 {
		case 0, 1: // a virtual thread dialling with vnet
			if _, err := s.Go(func(context.Context) error {
				c, err := vnet.Dial("tcp", addr)
				if err != nil {
					done(err)
					return nil
				}
				done(client(runner{s}, c, payload, uint64(i)))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		case 2: // a goroutine dialling with vnet
			go func() {
				c, err := vnet.Dial("tcp", addr)
				if err != nil {
					done(err)
					return
				}
				done(client(runner{}, c, payload, uint64(i)))
			}()
		case 3: // a goroutine dialling with package net
			go func() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					done(err)
					return
				}
				done(client(runner{}, c, payload, uint64(i)))
			}()
		}
	}
	start := time.Now()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(limit):
		panic(fmt.Sprintf("TestEcho: %d of %d clients unfinished after %v\n%s", pending.Load(), clients, limit, stacks()))
	}
	elapsed := time.Since(start)
	for i, err := range errs {
		if i == 10 {
			t.Errorf("... and %d more", len(errs)-10)
			break
		}
		t.Error(err)
	}
	if err := ln.Close(); err != nil {
		t.Error(err)
	}
	if err := acceptor.Join(); err != nil {
		t.Errorf("acceptor: %v", err)
	}
	shutdown(t, s)
	if srvErr != nil {
		t.Errorf("server: %v", srvErr)
	}
	if n := served.Load(); n != int64(clients) {
		t.Errorf("served %d connections, want %d", n, clients)
	}
	noPins(t, s)
	r1, w1 := vnet.ParkCounts()
	t.Logf("%s: %d clients (%d over 64 KiB) echoed in %v; parks: %d read, %d write", weft.Backend(), clients, large, elapsed.Round(time.Millisecond), r1-r0, w1-w0)
	if r1 == r0 || w1 == w0 {
		t.Errorf("reads parked %d times and writes %d times: the test did not exercise both", r1-r0, w1-w0)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestReadDeadline(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, srv := pair(t)
		err := r.start(t, func() error {
			buf := make([]byte, 16)
			// The deadline fires.
			c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			start := time.Now()
			if _, err := c.Read(buf); !isTimeout(err) {
				return fmt.Errorf("Read past the deadline: %v, want a timeout", err)
			}
			if d := time.Since(start); d < 40*time.Millisecond {
				return fmt.Errorf("Read timed out after %v, deadline 50ms", d)
			}
			// It stays passed, even with data to read.
			if _, err := srv.Write([]byte("x")); err != nil {
				return err
			}
			if _, err := c.Read(buf); !isTimeout(err) {
				return fmt.Errorf("second Read past the deadline: %v, want a timeout", err)
			}
			// Extending it makes Read work again.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "x" {
				return fmt.Errorf("Read after extending the deadline: %q, %v", buf[:n], err)
			}
			// Extending it while Read is blocked.
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			t1 := time.AfterFunc(30*time.Millisecond, func() { c.SetReadDeadline(time.Now().Add(10 * time.Second)) })
			t2 := time.AfterFunc(200*time.Millisecond, func() { srv.Write([]byte("y")) })
			start = time.Now()
			n, err := c.Read(buf)
			t1.Stop()
			t2.Stop()
			if err != nil || string(buf[:n]) != "y" {
				return fmt.Errorf("Read with its deadline extended while blocked: %q, %v", buf[:n], err)
			}
			if d := time.Since(start); d < 150*time.Millisecond {
				return fmt.Errorf("Read returned after %v, before the data was sent", d)
			}
			// A deadline set in the past while Read is blocked wakes it.
			c.SetReadDeadline(time.Time{})
			t3 := time.AfterFunc(30*time.Millisecond, func() { c.SetReadDeadline(time.Now().Add(-time.Second)) })
			_, err = c.Read(buf)
			t3.Stop()
			if !isTimeout(err) {
				return fmt.Errorf("Read with a deadline moved to the past: %v, want a timeout", err)
			}
			// SetDeadline covers reads too; the zero time clears it.
			c.SetDeadline(time.Now().Add(-time.Second))
			if _, err := c.Read(buf); !isTimeout(err) {
				return fmt.Errorf("Read after SetDeadline in the past: %v", err)
			}
			c.SetDeadline(time.Time{})
			srv.Write([]byte("z"))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "z" {
				return fmt.Errorf("Read after clearing the deadline: %q, %v", buf[:n], err)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestWriteDeadline(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, _ := pair(t)
		_, w0 := vnet.ParkCounts()
		err := r.start(t, func() error {
			// Nobody reads: the buffers fill up and Write parks until
			// the deadline.
			big := make([]byte, 64<<20)
			c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := c.Write(big)
			if !isTimeout(err) {
				return fmt.Errorf("Write past the deadline: %d, %v, want a timeout", n, err)
			}
			if n <= 0 || n >= len(big) {
				return fmt.Errorf("Write wrote %d bytes of %d before its deadline", n, len(big))
			}
			if _, err := c.Write([]byte("x")); !isTimeout(err) {
				return fmt.Errorf("second Write past the deadline: %v", err)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
		if _, w1 := vnet.ParkCounts(); w1 == w0 {
			t.Error("Write never parked")
		}
	})
}

// TestLargeWrite writes much more than the socket buffers hold: Write
// parks until the peer reads, and everything arrives.
func TestLargeWrite(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, srv := pair(t)
		payload := make([]byte, 32<<20)
		rand.NewChaCha8([32]byte{42}).Read(payload)
		waitW := r.start(t, func() error {
			if n, err := c.Write(payload); err != nil || n != len(payload) {
				return fmt.Errorf("Write = %d, %v", n, err)
			}
			return c.CloseWrite()
		})
		time.Sleep(20 * time.Millisecond) // let the buffers fill up
		var got []byte
		waitR := r.start(t, func() error {
			var err error
			got, err = io.ReadAll(srv)
			return err
		})
		if err := waitR(); err != nil {
			t.Fatal(err)
		}
		if err := waitW(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("read %d bytes, want %d (first difference at %d)", len(got), len(payload), firstDiff(got, payload))
		}
	})
}

func TestCloseWakesBlocked(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, srv := pair(t)
		r0, w0 := vnet.ParkCounts()
		waitR := r.start(t, func() error {
			_, err := c.Read(make([]byte, 10))
			return err
		})
		d, _ := pair(t)
		waitW := r.start(t, func() error {
			_, err := d.Write(make([]byte, 64<<20)) // nobody reads
			return err
		})
		for {
			r1, w1 := vnet.ParkCounts()
			if r1 > r0 && w1 > w0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		closeErrs := make(chan error, 2)
		waitC := r.start(t, func() error {
			closeErrs <- c.Close()
			closeErrs <- d.Close()
			return nil
		})
		if err := waitR(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Read after Close: %v, want net.ErrClosed", err)
		}
		if err := waitW(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Write after Close: %v, want net.ErrClosed", err)
		}
		waitC()
		for range 2 {
			if err := <-closeErrs; err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		if err := c.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Write after Close: %v, want net.ErrClosed", err)
		}
		if err := c.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("SetDeadline after Close: %v, want net.ErrClosed", err)
		}
		// The peer sees the end of the stream.
		if _, err := srv.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("peer's Read after Close: %v, want io.EOF", err)
		}
	})
}

func TestAcceptAfterClose(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r0, _ := vnet.ParkCounts()
		waitA := r.start(t, func() error {
			_, err := ln.Accept()
			return err
		})
		for r1, _ := vnet.ParkCounts(); r1 == r0; r1, _ = vnet.ParkCounts() {
			time.Sleep(time.Millisecond)
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if err := waitA(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Accept after Close: %v, want net.ErrClosed", err)
		}
		err = r.start(t, func() error {
			_, err := ln.Accept()
			return err
		})()
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
		if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}
	})
}

func TestAcceptDeadline(t *testing.T) {
	leakCheck(t)
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := ln.Accept(); !isTimeout(err) {
		t.Fatalf("Accept past the deadline: %v, want a timeout", err)
	}
}

// TestOneCarrier: with one carrier and no compensation, a virtual thread
// blocked in Read leaves the carrier to the others.
func TestOneCarrier(t *testing.T) {
	leakCheck(t)
	c, srv := pair(t)
	s := newSched(t, scheduler.Options{Carriers: 1, MaxCompensation: -1})
	r0, _ := vnet.ParkCounts()
	var got string
	reader := goVT(t, s, func() error {
		buf := make([]byte, 10)
		n, err := c.Read(buf)
		got = string(buf[:n])
		return err
	})
	for r1, _ := vnet.ParkCounts(); r1 == r0; r1, _ = vnet.ParkCounts() {
		time.Sleep(time.Millisecond)
	}
	var ran atomic.Bool
	other := goVT(t, s, func() error {
		ran.Store(true)
		scheduler.Sleep(10 * time.Millisecond)
		_, err := srv.Write([]byte("ping"))
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := other.Wait(ctx); err != nil {
		t.Fatalf("the other virtual thread: %v (ran: %v): the reader holds the carrier", err, ran.Load())
	}
	if err := reader.Wait(ctx); err != nil || got != "ping" {
		t.Fatalf("reader: %q, %v", got, err)
	}
	noPins(t, s)
}

func TestHalfClose(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, srv := pair(t)
		err := r.start(t, func() error {
			if _, err := c.Write([]byte("question")); err != nil {
				return err
			}
			if err := c.CloseWrite(); err != nil {
				return err
			}
			q, err := io.ReadAll(srv)
			if err != nil || string(q) != "question" {
				return fmt.Errorf("server read %q, %v", q, err)
			}
			if err := srv.CloseRead(); err != nil {
				return fmt.Errorf("CloseRead: %v", err)
			}
			if _, err := srv.Write([]byte("answer")); err != nil {
				return err
			}
			srv.CloseWrite()
			a, err := io.ReadAll(c)
			if err != nil || string(a) != "answer" {
				return fmt.Errorf("client read %q, %v", a, err)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestDialErrors(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		err := r.start(t, func() error {
			// A port nobody listens on.
			ln, err := vnet.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				return err
			}
			addr := ln.Addr().String()
			ln.Close()
			if _, err := vnet.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
				return fmt.Errorf("Dial to a closed port: %v, want ECONNREFUSED", err)
			}
			if _, err := vnet.Dial("udp", addr); err == nil || !strings.Contains(err.Error(), "unknown network") {
				return fmt.Errorf("Dial udp: %v, want an unknown network error", err)
			}
			if _, err := vnet.Dial("tcp", "no port"); err == nil {
				return errors.New("Dial with no port succeeded")
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := vnet.DialContext(ctx, "tcp", addr); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("DialContext with a cancelled context: %v", err)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestAddresses listens and dials with each network, a host name (resolved
// off the carrier), and the wildcard address.
func TestAddresses(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		cases := []struct{ network, listen, dial string }{
			{"tcp", "127.0.0.1:0", ""},
			{"tcp4", "127.0.0.1:0", ""},
			{"tcp", "localhost:0", "localhost"},
			{"tcp", ":0", "127.0.0.1"},
			{"tcp", "0.0.0.0:0", "127.0.0.1"},
			{"tcp", "[::]:0", "127.0.0.1"},
			{"tcp6", "[::1]:0", ""},
		}
		for _, tc := range cases {
			err := r.start(t, func() error {
				ln, err := vnet.Listen(tc.network, tc.listen)
				if err != nil {
					if strings.HasPrefix(tc.listen, "[") {
						t.Logf("no IPv6: %v", err)
						return nil
					}
					return err
				}
				defer ln.Close()
				addr := ln.Addr().(*net.TCPAddr)
				dial := addr.String()
				if tc.dial != "" {
					dial = net.JoinHostPort(tc.dial, fmt.Sprint(addr.Port))
				}
				wait := runner{}.start(t, func() error {
					c, err := ln.Accept()
					if err != nil {
						return err
					}
					defer c.Close()
					_, err = io.Copy(c, c)
					return err
				})
				c, err := vnet.Dial(tc.network, dial)
				if err != nil {
					return err
				}
				if c.RemoteAddr().(*net.TCPAddr).Port != addr.Port {
					return fmt.Errorf("RemoteAddr %v, listener %v", c.RemoteAddr(), addr)
				}
				c.Write([]byte("hi"))
				c.CloseWrite()
				b, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(b) != "hi" {
					return fmt.Errorf("echo %q, %v", b, err)
				}
				return wait()
			})()
			if err != nil {
				t.Errorf("%s %s: %v", tc.network, tc.listen, err)
			}
		}
	})
}

// TestManyConns opens and closes many connections at once: the poller
// starts, serves them all, and stops with nothing left behind.
func TestManyConns(t *testing.T) {
	leakCheck(t)
	const n = 200
	var conns []*vnet.Conn
	for range n / 2 {
		a, b := pair(t)
		conns = append(conns, a, b)
	}
	if !vnet.PollerActive() {
		t.Fatal("no poller with connections open")
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if vnet.PollerActive() {
		t.Fatal("the poller still runs with every connection closed")
	}
}

// TestUnreachableConnClosed: a connection dropped without Close is closed
// once the collector finds it unreachable, as package net does.
func TestUnreachableConnClosed(t *testing.T) {
	leakCheck(t)
	func() {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Write([]byte("dropped"))
			}
		}()
		c, err := vnet.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 7)); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for vnet.PollerActive() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if vnet.PollerActive() {
		t.Fatal("unreachable connections were not closed")
	}
}

// TestDialContextTimeout dials a listener whose accept queue is full, so
// that the connection cannot be established: DialContext gives up when its
// context ends.
func TestDialContextTimeout(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(s)
		if err := syscall.Bind(s, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Listen(s, 0); err != nil {
			t.Fatal(err)
		}
		sa, _ := syscall.Getsockname(s)
		addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
		var conns []*vnet.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		timedOut := false
		for range 8 {
			err := r.start(t, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				start := time.Now()
				c, err := vnet.DialContext(ctx, "tcp", addr)
				if err == nil {
					conns = append(conns, c)
					return nil
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					return fmt.Errorf("DialContext: %v, want context.DeadlineExceeded", err)
				}
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					return fmt.Errorf("DialContext: %v is not a timeout", err)
				}
				if d := time.Since(start); d < 90*time.Millisecond || d > 5*time.Second {
					return fmt.Errorf("DialContext gave up after %v, timeout 100ms", d)
				}
				timedOut = true
				return nil
			})()
			if err != nil {
				t.Fatal(err)
			}
			if timedOut {
				return
			}
		}
		t.Skip("the kernel accepted every connection: no way to make one hang")
	})
}

// BenchmarkPingPong measures a 64-byte round trip over loopback: a vnet
// connection between two virtual threads, and for comparison a package net
// connection between two goroutines.
func BenchmarkPingPong(b *testing.B) {
	pingPong := func(b *testing.B, c, srv net.Conn, run func(func() error) func() error) {
		echo := run(func() error {
			_, err := io.Copy(srv, srv)
			return err
		})
		msg := make([]byte, 64)
		b.ResetTimer()
		err := run(func() error {
			for range b.N {
				if _, err := c.Write(msg); err != nil {
					return err
				}
				if _, err := io.ReadFull(c, msg); err != nil {
					return err
				}
			}
			return nil
		})()
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
		echo()
		srv.Close()
	}
	b.Run("vnet-vthread", func(b *testing.B) {
		s, err := scheduler.New(scheduler.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Shutdown(context.Background())
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() { c, _ := ln.Accept(); accepted <- c }()
		c, err := vnet.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		srv := <-accepted
		ln.Close()
		pingPong(b, c, srv, func(f func() error) func() error {
			vt, err := s.Go(func(context.Context) error { return f() })
			if err != nil {
				b.Fatal(err)
			}
			return vt.Join
		})
	})
	b.Run("net-goroutine", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() { c, _ := ln.Accept(); accepted <- c }()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		srv := <-accepted
		ln.Close()
		pingPong(b, c, srv, func(f func() error) func() error {
			ch := make(chan error, 1)
			go func() { ch <- f() }()
			return func() error { return <-ch }
		})
	})
}

// TestPollerRestarts: the poller stops with the last socket and a new one
// starts with the next, over and over, while the carriers of a scheduler
// poll for readiness each time they run out of work (pollNow), and virtual
// threads wait on sockets of each generation: no readiness event is lost
// to a poller that has gone, and no descriptor leaks.
func TestPollerRestarts(t *testing.T) {
	testPollerRestarts(t, 200)
}

// TestBlockingPoller: the same with the loop blocking in epoll_wait, its
// fallback where the runtime will not poll the epoll descriptor.
func TestBlockingPoller(t *testing.T) {
	vnet.SetBlockingPoll(true)
	defer vnet.SetBlockingPoll(false)
	testPollerRestarts(t, 20)
}

func testPollerRestarts(t *testing.T, rounds int) {
	leakCheck(t)
	s := newSched(t, scheduler.Options{})
	for round := range rounds {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		vt, err := s.Go(func(ctx context.Context) error {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, 1)
			for range 3 {
				if _, err := io.ReadFull(c, buf); err != nil {
					return err
				}
				if _, err := c.Write(buf); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if round%2 == 0 {
				time.Sleep(50 * time.Microsecond) // let the vthread park first
			}
			if _, err := c.Write([]byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 1)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, b); err != nil || b[0] != byte(i) {
				t.Fatalf("round %d: echo %v, %v", round, b, err)
			}
		}
		if err := vt.Join(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		c.Close()
		ln.Close()
		if vnet.PollerActive() {
			t.Fatalf("round %d: the poller still runs with every socket closed", round)
		}
	}
}

// What every idle carrier does, looking for readiness, and what every
// readiness edge does, waking the operation queued for it, allocate
// nothing: an echo server's messages once cost two allocations each, the
// look's buffer (400 bytes) and the edge's queue.
func TestReadinessPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("needs a build without -race: under the race detector sync.Pool drops some of what is put back, on purpose, so the look allocates")
	}
	leakCheck(t)
	ln, err := vnet.Listen("tcp", "127.0.0.1:0") // starts the poller
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	look, edge := vnet.PollNowAllocs(100)
	if look != 0 {
		t.Errorf("a look for readiness: %v allocations, want 0", look)
	}
	if edge != 0 {
		t.Errorf("a readiness edge that wakes a waiter: %v allocations, want 0", edge)
	}
}

// A Write that has written all its bytes succeeds, as on package net,
// even if its deadline passes or Close begins just after its last system
// call: it returns len(p) and a nil error, never len(p) with a timeout or
// net.ErrClosed.
func TestWriteCompleteIgnoresLateDeadlineAndClose(t *testing.T) {
	leakCheck(t)
	c, srv := pair(t)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(io.Discard, srv)
	}()
	buf := make([]byte, 1024)
	rng := rand.New(rand.NewPCG(5, 6))
	late := 0
	for range 5000 {
		c.SetWriteDeadline(time.Now().Add(time.Duration(rng.IntN(30)) * time.Microsecond))
		if n, err := c.Write(buf); err != nil && n == len(buf) {
			late++
		}
	}
	if late > 0 {
		t.Errorf("%d of 5,000 Writes wrote every byte and returned a timeout", late)
	}
	c.SetWriteDeadline(time.Time{})

	// Close racing a Write of the same connection, on fresh pairs.
	late = 0
	for range 300 {
		a, b := pair(t)
		go io.Copy(io.Discard, b)
		timer := time.AfterFunc(time.Duration(rng.IntN(40))*time.Microsecond, func() { a.Close() })
		for {
			n, err := a.Write(buf)
			if err != nil {
				if n == len(buf) {
					late++
				}
				break
			}
		}
		timer.Stop()
		a.Close()
		b.Close()
	}
	if late > 0 {
		t.Errorf("%d of 300 Writes wrote every byte and returned an error for a Close that began after", late)
	}
	c.Close()
	<-drained
}
