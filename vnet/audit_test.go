//go:build linux

package vnet_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

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

func waitReadParked(r0 uint64) {
	for r1, _ := vnet.ParkCounts(); r1 == r0; r1, _ = vnet.ParkCounts() {
		time.Sleep(time.Millisecond)
	}
}
