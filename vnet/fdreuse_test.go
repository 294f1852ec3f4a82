//go:build linux

package vnet_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// TestFDReuseChurnWithParked: connections parked in Read, in virtual
// threads on several carriers and in goroutines, stay parked while many
// short-lived connections are opened and closed around them (so that
// their descriptor numbers are reused again and again while the poller
// holds the parked ones' registrations); each short-lived connection
// echoes its own bytes; then each parked Read gets exactly what its peer
// sends, or net.ErrClosed from Close. A registration that followed a
// descriptor number rather than its socket would wake the wrong waiter,
// lose a wake-up, or deliver one connection's bytes to another.
func TestFDReuseChurnWithParked(t *testing.T) {
	leakCheck(t)
	s := newSched(t, scheduler.Options{Carriers: 4})
	ln, err := vnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// Echo servers for the churn; a connection's own errors (a client
	// gone mid-copy) are not the test's.
	stop := acceptLoop(t, s, ln, func(c net.Conn) error {
		defer c.Close()
		io.Copy(c, c)
		return nil
	})
	const parked = 16
	type parkedRead struct {
		c, peer *vnet.Conn
		got     chan string
	}
	prs := make([]parkedRead, parked)
	for i := range prs {
		c, peer := pair(t)
		p := parkedRead{c, peer, make(chan string, 1)}
		prs[i] = p
		read := func() error {
			buf := make([]byte, 64)
			n, err := p.c.Read(buf)
			if err != nil {
				p.got <- "error: " + err.Error()
				if !errors.Is(err, net.ErrClosed) {
					return err
				}
				return nil
			}
			p.got <- string(buf[:n])
			return nil
		}
		if i%2 == 0 {
			goVT(t, s, read)
		} else {
			go read()
		}
	}
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		churn := func() error {
			defer wg.Done()
			for i := range rounds {
				c, err := vnet.Dial("tcp", addr)
				if err != nil {
					errs <- err
					return nil
				}
				if i%3 == 0 {
					c.Close() // its server side sees EOF at once
					continue
				}
				tok := fmt.Sprintf("w%d-%d", w, i)
				c.Write([]byte(tok))
				c.CloseWrite()
				b, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(b) != tok {
					errs <- fmt.Errorf("short-lived connection %s echoed %q, %v", tok, b, err)
					return nil
				}
			}
			return nil
		}
		if w%2 == 0 {
			goVT(t, s, churn)
		} else {
			go churn()
		}
	}
	churned := make(chan struct{})
	go func() { wg.Wait(); close(churned) }()
	select {
	case <-churned:
	case <-time.After(20 * time.Second):
		t.Fatalf("short-lived connections still busy after 20s\n%s", stacks())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, p := range prs {
		select {
		case got := <-p.got:
			t.Errorf("parked Read %d returned %q while nothing was sent to it", i, got)
			p.got <- got
		default:
		}
	}
	for i, p := range prs {
		if i%2 == 0 {
			p.peer.Write([]byte(fmt.Sprintf("parked %d", i)))
		} else {
			p.c.Close()
		}
	}
	for i, p := range prs {
		want := fmt.Sprintf("parked %d", i)
		if i%2 == 1 {
			want = "error: read tcp " + p.c.LocalAddr().String() + "->" + p.c.RemoteAddr().String() + ": use of closed network connection"
		}
		select {
		case got := <-p.got:
			if got != want {
				t.Errorf("parked Read %d: %q, want %q", i, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("parked Read %d still parked 10s after its peer wrote or it was closed\n%s", i, stacks())
		}
	}
	for _, err := range stop() {
		t.Errorf("server: %v", err)
	}
}
