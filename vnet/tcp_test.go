//go:build linux

package vnet_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/vnet"
	"golang.org/x/sys/unix"
)

// randomBytes returns n bytes from a seeded generator.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// TestSpliceProxy relays a connection through a proxy that copies each
// direction with io.Copy between two vnet connections, which splices: 8
// MiB each way (1 MiB with -short), more than the socket buffers and the
// pipe hold, so that both ends park, checked byte for byte, with the end
// of each stream passed on by CloseWrite.
func TestSpliceProxy(t *testing.T) {
	size := 8 << 20
	if testing.Short() {
		size = 1 << 20
	}
	modes(t, func(t *testing.T, r runner) {
		client, proxyIn := pair(t)
		proxyOut, server := pair(t)
		spliced0 := vnet.Spliced()
		relay := func(dst, src *vnet.Conn) func() error {
			return r.start(t, func() error {
				n, err := io.Copy(dst, src)
				if err != nil {
					return fmt.Errorf("relay: %d bytes, %w", n, err)
				}
				if n != int64(size) {
					return fmt.Errorf("relay copied %d bytes, want %d", n, size)
				}
				return dst.CloseWrite()
			})
		}
		up, down := relay(proxyOut, proxyIn), relay(proxyIn, proxyOut)
		// The server echoes what it reads through a buffer, not splice.
		echo := r.start(t, func() error {
			buf := make([]byte, 10_000)
			for {
				n, err := server.Read(buf)
				if _, werr := server.Write(buf[:n]); werr != nil {
					return werr
				}
				if err == io.EOF {
					return server.CloseWrite()
				}
				if err != nil {
					return err
				}
			}
		})
		payload := randomBytes(size, 7)
		send := r.start(t, func() error {
			if _, err := client.Write(payload); err != nil {
				return err
			}
			return client.CloseWrite()
		})
		var got []byte
		recv := r.start(t, func() error {
			var err error
			got, err = io.ReadAll(client)
			return err
		})
		for name, wait := range map[string]func() error{"send": send, "recv": recv, "up": up, "down": down, "echo": echo} {
			if err := wait(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("got %d bytes back, want %d (first difference at %d)", len(got), len(payload), firstDiff(got, payload))
		}
		if d := vnet.Spliced() - spliced0; d != 2*uint64(size) {
			t.Errorf("splice moved %d bytes, want %d: io.Copy between connections did not splice", d, 2*size)
		}
	})
}

// TestSpliceCopyN: io.CopyN between connections splices exactly n bytes
// and leaves the rest to be read.
func TestSpliceCopyN(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t)
		c, d := pair(t)
		payload := randomBytes(300_000, 9)
		err := r.start(t, func() error {
			if _, err := a.Write(payload); err != nil {
				return err
			}
			if err := a.CloseWrite(); err != nil {
				return err
			}
			const n = 200_001
			if got, err := io.CopyN(c, b, n); got != n || err != nil {
				return fmt.Errorf("CopyN = %d, %v; want %d, nil", got, err, n)
			}
			if err := c.CloseWrite(); err != nil {
				return err
			}
			first, err := io.ReadAll(d)
			if err != nil || !bytes.Equal(first, payload[:n]) {
				return fmt.Errorf("the copy: %d bytes, %v (first difference at %d)", len(first), err, firstDiff(first, payload[:n]))
			}
			rest, err := io.ReadAll(b)
			if err != nil || !bytes.Equal(rest, payload[n:]) {
				return fmt.Errorf("the rest: %d bytes, %v; want %d", len(rest), err, len(payload)-n)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestReadFromWriteToBuffers: ReadFrom from a reader that is not a
// connection, and WriteTo a writer that is not one, copy through a buffer.
func TestReadFromWriteToBuffers(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t)
		payload := randomBytes(1<<20+17, 11)
		spliced0 := vnet.Spliced()
		send := r.start(t, func() error {
			n, err := a.ReadFrom(bytes.NewReader(payload))
			if n != int64(len(payload)) || err != nil {
				return fmt.Errorf("ReadFrom = %d, %v", n, err)
			}
			return a.CloseWrite()
		})
		var sink bytes.Buffer
		recv := r.start(t, func() error {
			n, err := b.WriteTo(&sink)
			if n != int64(len(payload)) || err != nil {
				return fmt.Errorf("WriteTo = %d, %v", n, err)
			}
			return nil
		})
		if err := send(); err != nil {
			t.Fatal(err)
		}
		if err := recv(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sink.Bytes(), payload) {
			t.Fatalf("got %d bytes, want %d", sink.Len(), len(payload))
		}
		if d := vnet.Spliced() - spliced0; d != 0 {
			t.Errorf("%d bytes spliced between a connection and a buffer", d)
		}
	})
}

// TestSpliceErrors: a splice that cannot write past dst's write deadline
// fails with a timeout naming the write, one whose source's read deadline
// passes fails with a timeout naming the read, and one whose source is
// closed under it fails with net.ErrClosed; each says how much it copied.
func TestSpliceErrors(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t)
		c, _ := pair(t) // nobody reads c's peer
		err := r.start(t, func() error {
			// Write deadline: c's buffers fill up.
			go a.Write(make([]byte, 64<<20))
			c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := c.ReadFrom(b)
			var oe *net.OpError
			if !isTimeout(err) || !errors.As(err, &oe) || oe.Op != "write" || n >= 64<<20 {
				return fmt.Errorf("ReadFrom past dst's write deadline = %d, %v; want a write timeout", n, err)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t)
		c, d := pair(t)
		wait := r.start(t, func() error {
			n, err := c.ReadFrom(b)
			var oe *net.OpError
			if !isTimeout(err) || !errors.As(err, &oe) || oe.Op != "read" || n != 4 {
				return fmt.Errorf("ReadFrom past src's read deadline = %d, %v; want 4 bytes and a read timeout", n, err)
			}
			return nil
		})
		a.Write([]byte("some"))
		// Once the 4 bytes have gone through, the splice waits on b: its
		// read deadline ends it.
		if _, err := io.ReadFull(d, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		b.SetReadDeadline(time.Now())
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	})
	modes(t, func(t *testing.T, r runner) {
		_, b := pair(t)
		c, _ := pair(t)
		wait := r.start(t, func() error {
			n, err := c.ReadFrom(b)
			if !errors.Is(err, net.ErrClosed) || n != 0 {
				return fmt.Errorf("ReadFrom from a connection closed under it = %d, %v; want net.ErrClosed", n, err)
			}
			return nil
		})
		time.Sleep(50 * time.Millisecond) // let it park
		b.Close()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSyscallConn: the TCP options read back through the raw connection,
// and its Read and Write call their function again, after parking, until
// it reports done, and honour deadlines and Close.
func TestSyscallConn(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t)
		err := r.start(t, func() error {
			rc, err := b.SyscallConn()
			if err != nil {
				return err
			}
			getInt := func(level, opt int) int {
				var v int
				var gerr error
				if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil || gerr != nil {
					panic(fmt.Sprint(err, gerr))
				}
				return v
			}
			if v := getInt(unix.IPPROTO_TCP, unix.TCP_NODELAY); v != 1 {
				return fmt.Errorf("a new connection has TCP_NODELAY %d, want 1", v)
			}
			for _, step := range []struct {
				set        func() error
				level, opt int
				want       func(int) bool
			}{
				{func() error { return b.SetNoDelay(false) }, unix.IPPROTO_TCP, unix.TCP_NODELAY, func(v int) bool { return v == 0 }},
				{func() error { return b.SetKeepAlive(true) }, unix.SOL_SOCKET, unix.SO_KEEPALIVE, func(v int) bool { return v == 1 }},
				{func() error { return b.SetKeepAlivePeriod(2500 * time.Millisecond) }, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, func(v int) bool { return v == 3 }},
				{func() error { return b.SetKeepAlivePeriod(0) }, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, func(v int) bool { return v == 15 }},
				{func() error { return b.SetKeepAlivePeriod(-1) }, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, func(v int) bool { return v == 15 }},
				{func() error { return b.SetReadBuffer(1 << 16) }, unix.SOL_SOCKET, unix.SO_RCVBUF, func(v int) bool { return v >= 1<<16 }},
				{func() error { return b.SetWriteBuffer(1 << 16) }, unix.SOL_SOCKET, unix.SO_SNDBUF, func(v int) bool { return v >= 1<<16 }},
			} {
				if err := step.set(); err != nil {
					return err
				}
				if v := getInt(step.level, step.opt); !step.want(v) {
					return fmt.Errorf("option %d/%d reads back %d", step.level, step.opt, v)
				}
			}
			if err := b.SetLinger(0); err != nil {
				return err
			}
			var l *unix.Linger
			rc.Control(func(fd uintptr) { l, _ = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER) })
			if l == nil || l.Onoff != 1 || l.Linger != 0 {
				return fmt.Errorf("SO_LINGER after SetLinger(0) = %+v", l)
			}

			// Read: the first call finds nothing (EAGAIN) and parks until
			// the peer writes, which it does only after that first call.
			first := make(chan struct{})
			go func() {
				<-first
				time.Sleep(10 * time.Millisecond)
				a.Write([]byte("ping"))
			}()
			calls, buf, got := 0, make([]byte, 16), 0
			err = rc.Read(func(fd uintptr) bool {
				if calls++; calls == 1 {
					close(first)
				}
				n, err := unix.Read(int(fd), buf)
				if err == unix.EAGAIN {
					return false
				}
				got = n
				return true
			})
			if err != nil || string(buf[:got]) != "ping" || calls < 2 {
				return fmt.Errorf("raw Read = %v after %d calls, read %q; want ping after parking", err, calls, buf[:got])
			}
			if err := rc.Write(func(fd uintptr) bool {
				_, err := unix.Write(int(fd), []byte("pong"))
				return err != unix.EAGAIN
			}); err != nil {
				return err
			}
			if _, err := io.ReadFull(a, buf[:4]); err != nil || string(buf[:4]) != "pong" {
				return fmt.Errorf("the peer read %q, %v after a raw Write", buf[:4], err)
			}

			// A deadline ends a raw Read that is never done.
			b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if err := rc.Read(func(uintptr) bool { return false }); !isTimeout(err) || !strings.Contains(err.Error(), "raw-read") {
				return fmt.Errorf("raw Read past the deadline: %v", err)
			}
			b.Close()
			if err := rc.Control(func(uintptr) {}); !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("Control after Close: %v, want net.ErrClosed", err)
			}
			if err := b.SetNoDelay(true); !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("SetNoDelay after Close: %v, want net.ErrClosed", err)
			}
			return nil
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestListenerSyscallConn: a listener's raw Read waits for a pending
// connection.
func TestListenerSyscallConn(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		rc, err := ln.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(30 * time.Millisecond)
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				defer c.Close()
				time.Sleep(100 * time.Millisecond)
			}
		}()
		err = r.start(t, func() error {
			accepted := -1
			err := rc.Read(func(fd uintptr) bool {
				nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
				if err == unix.EAGAIN {
					return false
				}
				accepted = nfd
				return true
			})
			if err != nil || accepted < 0 {
				return fmt.Errorf("raw Read on a listener = %v, accepted %d", err, accepted)
			}
			return unix.Close(accepted)
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}

// A two-way proxy in which each direction copies and then closes both
// connections tears down when one end leaves while the other stays
// silent: a splice holds a reference to each socket only while it uses
// it, so closing the one it is not parked on does not wait for it (it
// did, and the proxy deadlocked).
func TestSpliceProxyTeardown(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		client, pin := pair(t)
		pout, server := pair(t)
		closeBoth := func() { pin.Close(); pout.Close() }
		up := r.start(t, func() error { io.Copy(pout, pin); closeBoth(); return nil })
		down := r.start(t, func() error { io.Copy(pin, pout); closeBoth(); return nil })
		client.Write([]byte("hello"))
		if _, err := io.ReadFull(server, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
		client.Close() // the client leaves; the server stays silent
		done := make(chan struct{})
		go func() { up(); down(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			server.Close()
			<-done
			t.Fatal("the proxy did not tear down: a Close waited for a splice parked on the other connection")
		}
	})
}

// Closing a splice's destination while it waits for its source returns at
// once; the splice fails with net.ErrClosed when the source next has data.
func TestSpliceCloseOther(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		a, b := pair(t) // b is the source; a writes only at the end
		c, _ := pair(t)
		wait := r.start(t, func() error {
			n, err := c.ReadFrom(b)
			if !errors.Is(err, net.ErrClosed) || n != 0 {
				return fmt.Errorf("ReadFrom = %d, %v; want net.ErrClosed", n, err)
			}
			return nil
		})
		time.Sleep(20 * time.Millisecond) // most likely parked on b by now
		done := make(chan error, 1)
		go func() { done <- c.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			a.Write([]byte("x"))
			<-done
			t.Error("closing the destination waited for the splice parked on the source")
		}
		a.Write([]byte("x"))
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// A function given to the raw connection that panics leaves no reference
// behind: Close after a recovered panic returns.
func TestSyscallConnPanic(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		_, b := pair(t)
		err := r.start(t, func() error {
			rc, _ := b.SyscallConn()
			for _, op := range []func() error{
				func() error { return rc.Control(func(uintptr) { panic("control") }) },
				func() error { return rc.Read(func(uintptr) bool { panic("read") }) },
				func() error { return rc.Write(func(uintptr) bool { panic("write") }) },
			} {
				func() {
					defer func() { recover() }()
					op()
				}()
			}
			done := make(chan error, 1)
			go func() { done <- b.Close() }()
			select {
			case err := <-done:
				return err
			case <-time.After(5 * time.Second):
				return errors.New("Close hangs after a panic in a raw connection's function")
			}
		})()
		if err != nil {
			t.Fatal(err)
		}
	})
}
