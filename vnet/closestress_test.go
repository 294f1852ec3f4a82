//go:build linux

package vnet_test

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// TestCloseStress races Close with parked and running Reads, Writes
// and deadline changes.
func TestCloseStress(t *testing.T) {
	leakCheck(t)
	s := newSched(t, scheduler.Options{})
	for i := range 100 {
		c, srv := pair(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		run := func(vt bool, fn func() error) {
			wg.Add(1)
			if vt {
				goVT(t, s, func() error { defer wg.Done(); errs <- fn(); return nil })
			} else {
				go func() { defer wg.Done(); errs <- fn() }()
			}
		}
		vtm := i%2 == 0
		run(vtm, func() error { _, err := c.Read(make([]byte, 100)); return err })
		run(!vtm, func() error { _, err := c.Read(make([]byte, 100)); return err })
		run(vtm, func() error { _, err := c.Write(make([]byte, 8<<20)); return err })
		run(!vtm, func() error { _, err := c.Write(make([]byte, 1<<20)); return err })
		run(vtm, func() error {
			for range 20 {
				if err := c.SetDeadline(time.Now().Add(time.Duration(rand.IntN(3000)) * time.Microsecond)); err != nil {
					return err
				}
				time.Sleep(100 * time.Microsecond)
			}
			return nil
		})
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("operations still blocked after Close\n%s", stacks())
		}
		close(errs)
		for err := range errs {
			if err == nil || errors.Is(err, net.ErrClosed) || isTimeout(err) {
				continue
			}
			t.Errorf("round %d: unexpected error %v", i, err)
		}
		srv.Close()
	}
}

// TestAcceptCloseStress races Close with parked Accepts.
func TestAcceptCloseStress(t *testing.T) {
	leakCheck(t)
	s := newSched(t, scheduler.Options{})
	for range 100 {
		ln, err := vnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Add(1)
			fn := func() error {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						if !errors.Is(err, net.ErrClosed) {
							t.Errorf("Accept: %v", err)
						}
						return nil
					}
					c.Close()
				}
			}
			if k%2 == 0 {
				goVT(t, s, fn)
			} else {
				go fn()
			}
		}
		addr := ln.Addr().String()
		for range 3 {
			if c, err := vnet.Dial("tcp", addr); err == nil {
				io.Copy(io.Discard, c)
				c.Close()
			} else if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		ln.Close()
		wg.Wait()
	}
}
