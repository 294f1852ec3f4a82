//go:build linux

package vnet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftrt/weft/vnet"
)

// A Write waiting for its turn behind a splicing ReadFrom that is parked
// on its source (which holds the write lock, so that their bytes do not
// interleave) still honours the write deadline, as net.Conn's
// SetWriteDeadline promises for "any currently-blocked Write call", however
// long the source stays silent.
func TestWriteDeadlineBehindSplice(t *testing.T) {
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

// Shortening a deadline while an operation is parked wakes it at the new one.
func TestDeadlineShortenedWhileParked(t *testing.T) {
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
func TestDeadlineClearedWhileParked(t *testing.T) {
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
