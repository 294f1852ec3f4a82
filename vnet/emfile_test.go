//go:build linux

package vnet_test

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/vnet"
)

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
func TestEMFILE(t *testing.T) {
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
