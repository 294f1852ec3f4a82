//go:build linux

package vnet_test

import (
	"errors"
	"net"
	"strconv"
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

// "tcp6" is IPv6 only: an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is an
// IPv4 address to it, as to package net, which finds no suitable address;
// vnet dialled such an address over IPv4 and failed to bind one with
// EINVAL. "tcp" and "tcp4" take it for the IPv4 address, as net does.
func TestTCP6RefusesMappedIPv4(t *testing.T) {
	leakCheck(t)
	ln, err := vnet.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	mapped := net.JoinHostPort("::ffff:127.0.0.1", port)
	noSuitable := func(what string, err error) {
		t.Helper()
		var ae *net.AddrError
		if !errors.As(err, &ae) || ae.Err != "no suitable address found" {
			t.Errorf("%s = %v, want no suitable address, as package net", what, err)
		}
	}
	c, err := vnet.Dial("tcp6", mapped)
	if err == nil {
		t.Errorf("Dial(tcp6, %s) connected %v to %v", mapped, c.LocalAddr(), c.RemoteAddr())
		c.Close()
	}
	noSuitable("Dial(tcp6, "+mapped+")", err)
	l6, err := vnet.Listen("tcp6", "[::ffff:127.0.0.1]:0")
	if err == nil {
		t.Errorf("Listen(tcp6, [::ffff:127.0.0.1]:0) listens on %v", l6.Addr())
		l6.Close()
	}
	noSuitable("Listen(tcp6, [::ffff:127.0.0.1]:0)", err)
	for _, network := range []string{"tcp", "tcp4"} {
		done := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Close()
			}
			done <- err
		}()
		c, err := vnet.Dial(network, mapped)
		if err != nil {
			t.Errorf("Dial(%s, %s): %v", network, mapped, err)
			ln.Close() // ends the Accept
			<-done
			return
		}
		if ra := c.RemoteAddr().(*net.TCPAddr); ra.IP.To4() == nil || ra.Port != ln.Addr().(*net.TCPAddr).Port {
			t.Errorf("Dial(%s, %s) connected to %v", network, mapped, ra)
		}
		c.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// The IPv6 unspecified address "::" stands for 0.0.0.0 too, as in package
// net (its fallback for a half-configured IPv6, issue 18806): "tcp4" listens
// on 0.0.0.0 with it and dials the local system, where vnet found no
// suitable address.
func TestTCP4UnspecifiedIPv6(t *testing.T) {
	leakCheck(t)
	ln, err := vnet.Listen("tcp4", "[::]:0")
	if err != nil {
		t.Fatalf("Listen(tcp4, [::]:0): %v; net.Listen listens on 0.0.0.0", err)
	}
	defer ln.Close()
	a := ln.Addr().(*net.TCPAddr)
	if !a.IP.Equal(net.IPv4zero) || a.Port == 0 {
		t.Fatalf("Listen(tcp4, [::]:0) listens on %v; net.Listen on 0.0.0.0", a)
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	dial := net.JoinHostPort("::", strconv.Itoa(a.Port))
	c, err := vnet.Dial("tcp4", dial)
	if err != nil {
		ln.Close() // ends the Accept
		<-done
		t.Fatalf("Dial(tcp4, %s): %v; net.Dial connects to 127.0.0.1", dial, err)
	}
	if ra := c.RemoteAddr().(*net.TCPAddr); ra.IP.To4() == nil || ra.Port != a.Port {
		t.Errorf("Dial(tcp4, %s) connected to %v", dial, ra)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// "tcp" still listens on IPv6 (and IPv4) with it, where IPv6 is.
	if l6, err := vnet.Listen("tcp", "[::]:0"); err == nil {
		if ip := l6.Addr().(*net.TCPAddr).IP; !ip.Equal(net.IPv6unspecified) {
			t.Errorf("Listen(tcp, [::]:0) listens on %v, want ::", ip)
		}
		l6.Close()
	}
}
