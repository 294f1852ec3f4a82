package vnet

import (
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestZoneNamedAsNetDoes: an IPv6 address's zone is reported by its
// interface's name, as package net reports it, and by its index only when
// no interface has that index.
func TestZoneNamedAsNetDoes(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Skipf("this test needs a network interface to name a zone by (net.Interfaces: %d, %v)", len(ifs), err)
	}
	ifi := ifs[0]
	sa := &unix.SockaddrInet6{Port: 80, ZoneId: uint32(ifi.Index), Addr: [16]byte{0: 0xfe, 1: 0x80, 15: 1}}
	a := sockaddrToTCP(sa)
	if a.Zone != ifi.Name {
		t.Errorf("zone of interface %d: got %q, want %q", ifi.Index, a.Zone, ifi.Name)
	}
	if want := "[fe80::1%" + ifi.Name + "]:80"; a.String() != want {
		t.Errorf("address: got %s, want %s", a, want)
	}
	// The name goes back to the same index.
	back, err := sockaddr(unix.AF_INET6, a)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.(*unix.SockaddrInet6).ZoneId; got != uint32(ifi.Index) {
		t.Errorf("zone %q back to index %d, want %d", a.Zone, got, ifi.Index)
	}
	unknown := uint32(1 << 30)
	for _, i := range ifs {
		if uint32(i.Index) == unknown {
			t.Skip("an interface has index 1<<30")
		}
	}
	sa.ZoneId = unknown
	if got, want := sockaddrToTCP(sa).Zone, strconv.Itoa(1<<30); got != want {
		t.Errorf("zone of no interface: got %q, want %q", got, want)
	}
}
