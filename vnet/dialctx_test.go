//go:build linux

package vnet_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/weftrt/weft/vnet"
)

// fakeDNS answers every A query with 127.0.0.1 and every AAAA query with
// ::1, and makes net.DefaultResolver use it until the test ends.
func fakeDNS(t *testing.T) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			i := 12
			for i < len(q) && q[i] != 0 {
				i += int(q[i]) + 1
			}
			i++
			if i+4 > len(q) {
				continue
			}
			qtype := binary.BigEndian.Uint16(q[i:])
			question := q[12 : i+4]
			var rdata []byte
			switch qtype {
			case 1:
				rdata = []byte{127, 0, 0, 1}
			case 28:
				rdata = net.IPv6loopback
			}
			resp := []byte{q[0], q[1], 0x85, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}
			resp = append(resp, question...)
			if rdata != nil {
				resp[7] = 1
				resp = append(resp, 0xc0, 0x0c)
				resp = binary.BigEndian.AppendUint16(resp, qtype)
				resp = append(resp, 0, 1, 0, 0, 0, 60)
				resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
				resp = append(resp, rdata...)
			}
			pc.WriteTo(resp, from)
		}
	}()
	r := net.DefaultResolver
	preferGo, dial := r.PreferGo, r.Dial
	r.PreferGo = true
	r.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}
	t.Cleanup(func() { r.PreferGo, r.Dial = preferGo, dial })
}

// TestDialContextLaterAddressTimesOut: a name with two addresses;
// the first refuses the connection at once, the second never answers
// (its listener's accept queue is full). DialContext is documented to
// return an error wrapping ctx.Err() when ctx ends before the connection
// is established, not the first address's ECONNREFUSED.
func TestDialContextLaterAddressTimesOut(t *testing.T) {
	leakCheck(t)
	fakeDNS(t)
	const host = "multi.vnet.test"
	ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
	if err != nil || len(ips) != 2 {
		t.Skipf("fake resolver: %v, %v", ips, err)
	}
	second := ips[1].Unmap()
	family, sa := syscall.AF_INET, syscall.Sockaddr(&syscall.SockaddrInet4{Addr: second.As4()})
	if second.Is6() {
		family, sa = syscall.AF_INET6, &syscall.SockaddrInet6{Addr: second.As16()}
	}
	s, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(s)
	if family == syscall.AF_INET6 {
		syscall.SetsockoptInt(s, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 1)
	}
	if err := syscall.Bind(s, sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(s, 0); err != nil {
		t.Fatal(err)
	}
	lsa, _ := syscall.Getsockname(s)
	var port int
	switch a := lsa.(type) {
	case *syscall.SockaddrInet4:
		port = a.Port
	case *syscall.SockaddrInet6:
		port = a.Port
	}
	// Fill the accept queue so that a further connect hangs.
	full := false
	for range 16 {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(second, uint16(port)).String(), 200*time.Millisecond)
		if err != nil {
			full = true
			break
		}
		defer c.Close()
	}
	if !full {
		t.Skip("the accept queue never filled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := vnet.DialContext(ctx, "tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	if err == nil {
		c.Close()
		t.Fatal("DialContext connected")
	}
	if ctx.Err() == nil {
		t.Fatalf("DialContext returned before its context ended: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DialContext whose context ended while dialing %v: %v, want an error wrapping context.DeadlineExceeded", second, err)
	}
}
