//go:build linux

package vnet_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/weftrt/weft/vnet"
)

// An empty address means what it means to package net: Listen on every
// local address at a port the system chooses (as ":0" does), and no
// address at all to Dial, an error saying so.
func TestEmptyAddress(t *testing.T) {
	leakCheck(t)
	for _, network := range []string{"tcp", "tcp4", "tcp6"} {
		want, err := net.Listen(network, "")
		if err != nil {
			t.Logf("net.Listen(%q, \"\"): %v: not compared", network, err)
			continue
		}
		wantIP := want.Addr().(*net.TCPAddr).IP
		want.Close()
		ln, err := vnet.Listen(network, "")
		if err != nil {
			t.Errorf("Listen(%q, \"\"): %v; net.Listen listens on %v", network, err, wantIP)
			continue
		}
		a := ln.Addr().(*net.TCPAddr)
		if a.Port == 0 || !a.IP.Equal(wantIP) {
			t.Errorf("Listen(%q, \"\") listens on %v; net.Listen on %v with a port", network, a, wantIP)
		}
		ln.Close()
	}
	_, nerr := net.Dial("tcp", "")
	_, err := vnet.Dial("tcp", "")
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" || oe.Err == nil || nerr == nil || oe.Err.Error() != "missing address" || !strings.HasSuffix(nerr.Error(), ": missing address") {
		t.Errorf("Dial(\"tcp\", \"\") = %v; net.Dial says %v", err, nerr)
	}
}
