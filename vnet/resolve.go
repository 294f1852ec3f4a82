package vnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sort"
	"strconv"

	"github.com/weftrt/weft/scheduler"
)

var (
	errNoSuitableAddress = errors.New("no suitable address found")
	errMissingAddress    = errors.New("missing address") // package net's words
)

// resolve turns addr into the TCP addresses to listen on or dial, in the
// order to try them. An IP literal and a numeric port are parsed in place;
// a host name or a service name is looked up by the standard resolver on a
// goroutine of its own, so that a virtual thread parks meanwhile.
func resolve(ctx context.Context, network, addr string, listen bool) ([]*net.TCPAddr, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, net.UnknownNetworkError(network)
	}
	if addr == "" {
		// As package net: no address at all is every local address and
		// a chosen port to listen on, and nothing to dial.
		if listen {
			return []*net.TCPAddr{{}}, nil
		}
		return nil, errMissingAddress
	}
	host, service, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := parsePort(ctx, network, service)
	if err != nil {
		return nil, err
	}
	if host == "" {
		if listen {
			// A nil IP: all addresses (sysListen picks the family).
			return []*net.TCPAddr{{Port: port}}, nil
		}
		// As net.Dial: the local system.
		if network == "tcp6" {
			return []*net.TCPAddr{{IP: net.IPv6loopback, Port: port}}, nil
		}
		return []*net.TCPAddr{{IP: net.IPv4(127, 0, 0, 1), Port: port}}, nil
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ipnet := map[string]string{"tcp": "ip", "tcp4": "ip4", "tcp6": "ip6"}[network]
		ips, err = offload(func() ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, ipnet, host)
		})
		if err != nil {
			return nil, err
		}
	}
	if len(ips) == 1 && ips[0].WithZone("") == netip.IPv6Unspecified() && (!listen || network == "tcp4") {
		// As package net (issue 18806): "::" is 0.0.0.0 as well, for a
		// system whose IPv6 is half configured and for "tcp4". Not to
		// listen with "tcp", which listens on both where it can (and
		// would take the IPv4 address first).
		ips = append(ips, netip.IPv4Unspecified())
	}
	var out []*net.TCPAddr
	for _, ip := range ips { // the resolver's order (RFC 6724)
		// An IPv4-mapped address is an IPv4 one, as in package net:
		// "tcp6" has no use for it.
		ip = ip.Unmap()
		if ip.Is4() && network == "tcp6" || ip.Is6() && network == "tcp4" {
			continue
		}
		out = append(out, &net.TCPAddr{IP: net.IP(ip.AsSlice()), Port: port, Zone: ip.Zone()})
	}
	if listen {
		// As net.Listen: an IPv4 address first.
		sort.SliceStable(out, func(i, j int) bool { return out[i].IP.To4() != nil && out[j].IP.To4() == nil })
	}
	if len(out) == 0 {
		return nil, &net.AddrError{Err: errNoSuitableAddress.Error(), Addr: host}
	}
	return out, nil
}

func parsePort(ctx context.Context, network, service string) (int, error) {
	if service == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(service, 10, 16); err == nil {
		return int(n), nil
	}
	return offload(func() (int, error) {
		return net.DefaultResolver.LookupPort(ctx, network, service)
	})
}

// offload runs f, which may block, on a goroutine of its own while the
// calling virtual thread parks. From a plain goroutine it calls f.
func offload[T any](f func() (T, error)) (T, error) {
	if scheduler.Current() == nil {
		return f()
	}
	var (
		res T
		err error
	)
	w := newWaiter()
	go func() {
		res, err = f()
		w.wake()
	}()
	w.wait()
	return res, err
}
