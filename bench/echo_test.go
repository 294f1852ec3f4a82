//go:build linux

package bench

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// BenchmarkEcho measures an echo server's throughput: a vnet server with a
// virtual thread per connection (impl=vthread; impl=vthread-unlocked on
// carriers not locked to their threads) against a package net server with
// a goroutine per connection (impl=goroutine), all echoing with io.Copy.
// The clients are the same for all: echoClients plain goroutines on
// package net, each sending echoMsg-byte messages and reading each back
// before the next. One op is one message's round trip;
// MB/s counts the bytes sent.
func BenchmarkEcho(b *testing.B) {
	for _, impl := range []string{"vthread", "vthread-unlocked", "goroutine"} {
		b.Run("impl="+impl, func(b *testing.B) {
			addr, stop := startEcho(b, impl)
			b.SetBytes(echoMsg)
			b.ResetTimer()
			err := echoLoad(addr, b.N)
			b.StopTimer() // stopping a server is not part of a message
			stop()
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

const (
	echoClients = 32
	echoMsg     = 1024
)

// startEcho starts an echo server of kind impl on 127.0.0.1 and returns its
// address and a function that stops it and waits for its workers.
func startEcho(tb testing.TB, impl string) (string, func()) {
	tb.Helper()
	var wg sync.WaitGroup
	serve := func(c net.Conn) {
		defer wg.Done()
		io.Copy(c, c)
		c.Close()
	}
	switch impl {
	case "vthread", "vthread-unlocked":
		opts := scheduler.Options{}
		if impl == "vthread-unlocked" {
			opts.LockOSThread = &unlocked
		}
		s := newScheduler(opts)
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		wg.Add(1)
		mustGo(s, func(ctx context.Context) error {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return nil
				}
				wg.Add(1)
				mustGo(s, func(ctx context.Context) error { serve(c); return nil })
			}
		})
		return ln.Addr().String(), func() { ln.Close(); wg.Wait(); shutdown(s) }
	default:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Add(1)
				go serve(c)
			}
		}()
		return ln.Addr().String(), func() { ln.Close(); wg.Wait() }
	}
}

// echoLoad sends n messages to the echo server at addr over echoClients
// connections and checks every echoed byte.
func echoLoad(addr string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, echoClients)
	for i := range echoClients {
		count := n / echoClients
		if i < n%echoClients {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			msg := bytes.Repeat([]byte{byte(i)}, echoMsg)
			got := make([]byte, echoMsg)
			for range count {
				if _, err := c.Write(msg); err != nil {
					errs <- err
					return
				}
				if _, err := io.ReadFull(c, got); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, msg) {
					errs <- io.ErrUnexpectedEOF
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// The echo helpers echo every byte on both servers and leave nothing
// running.
func TestEchoHelpers(t *testing.T) {
	for _, impl := range []string{"vthread", "vthread-unlocked", "goroutine"} {
		addr, stop := startEcho(t, impl)
		if err := echoLoad(addr, 200); err != nil {
			t.Errorf("%s: %v", impl, err)
		}
		stop()
	}
}
