//go:build linux

package vnet_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vnet"
)

// The poller's goroutine serves every socket of the process: it must not
// carry the profiler labels of whoever happened to open the first one,
// which CPU and goroutine profiles would charge all of vnet's readiness
// dispatch to, for as long as any socket stays open.
func TestPollerLabels(t *testing.T) {
	leakCheck(t)
	for deadline := time.Now().Add(5 * time.Second); vnet.PollerActive() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if vnet.PollerActive() {
		t.Skip("a poller still runs: the first socket would not be this test's")
	}
	var ln *vnet.Listener
	pprof.Do(context.Background(), pprof.Labels("vnet_opener", "first_socket"), func(context.Context) {
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
	if strings.Contains(rec, "vnet_opener") {
		t.Errorf("the poller's goroutine has the labels of the goroutine that opened the first socket:\n%s", rec)
	}
}

// A virtual thread of a deterministic scheduler parked in Read is woken
// by the poller (from outside the simulation) and by its deadline.
func TestPollerWakesDeterministic(t *testing.T) {
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
