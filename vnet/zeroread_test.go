//go:build linux

package vnet_test

import (
	"errors"
	"net"
	"testing"
	"time"
)

// A zero-byte Read returns 0 and nil at once, as package net's does, even
// past the read deadline; on a closed connection it fails with
// net.ErrClosed.
func TestZeroReadPastDeadline(t *testing.T) {
	modes(t, func(t *testing.T, r runner) {
		c, _ := pair(t)
		wait := r.start(t, func() error {
			c.SetReadDeadline(time.Now().Add(-time.Second))
			if n, err := c.Read(nil); n != 0 || err != nil {
				t.Errorf("Read(nil) past the deadline = %d, %v; want 0, nil as package net", n, err)
			}
			c.Close()
			if _, err := c.Read(nil); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Read(nil) on a closed Conn: %v, want net.ErrClosed", err)
			}
			return nil
		})
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	})
}
