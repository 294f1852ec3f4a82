//go:build linux

package vnet

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestDialContextSharesDeadline: a name with two addresses, the first of
// which never answers. DialContext gives the first only its share of
// ctx's deadline, as package net does, and connects to the second within
// it; before, the first used up the whole deadline.
func TestDialContextSharesDeadline(t *testing.T) {
	ln := loopback(t)
	good := ln.Addr().(*net.TCPAddr)
	silent := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: good.Port}

	realResolve, realDial, realMin := resolveDialFunc, sysDialFunc, minDialPart
	t.Cleanup(func() { resolveDialFunc, sysDialFunc, minDialPart = realResolve, realDial, realMin })
	resolveDialFunc = func(context.Context, string, string, bool) ([]*net.TCPAddr, error) {
		return []*net.TCPAddr{silent, good}, nil
	}
	var silentLeft atomic.Int64 // the time the silent address was given
	sysDialFunc = func(ctx context.Context, network string, ra *net.TCPAddr) (*netFD, *net.TCPAddr, *net.TCPAddr, error) {
		if ra == silent {
			if d, ok := ctx.Deadline(); ok {
				silentLeft.Store(int64(time.Until(d)))
			}
			<-ctx.Done() // a SYN nobody answers
			return nil, nil, nil, ctx.Err()
		}
		return realDial(ctx, network, ra)
	}
	minDialPart = 20 * time.Millisecond

	const budget = 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	c, err := DialContext(ctx, "tcp", "multi.test:0")
	if err != nil {
		t.Fatalf("DialContext with a silent first address: %v (the first address had %v of %v)",
			err, time.Duration(silentLeft.Load()), budget)
	}
	c.Close()
	if got := time.Duration(silentLeft.Load()); got <= 0 || got > budget/2+50*time.Millisecond {
		t.Errorf("the first of two addresses was given %v of a %v deadline, want about half", got, budget)
	}
}

// partialContext's shares: package net's partialDeadline.
func TestPartialContext(t *testing.T) {
	realMin := minDialPart
	t.Cleanup(func() { minDialPart = realMin })
	minDialPart = 2 * time.Second
	for _, k := range []struct {
		left      time.Duration
		remaining int
		want      time.Duration // 0: ctx itself
	}{
		{10 * time.Second, 1, 0},
		{10 * time.Second, 2, 5 * time.Second},
		{10 * time.Second, 10, 2 * time.Second}, // at least minDialPart
		{3 * time.Second, 2, 2 * time.Second},
		{time.Second, 3, 0}, // less than minDialPart left: all of it
	} {
		ctx, cancel := context.WithTimeout(context.Background(), k.left)
		pctx, pcancel := partialContext(ctx, k.remaining)
		d, _ := pctx.Deadline()
		got := time.Until(d)
		if k.want == 0 {
			if pctx != ctx {
				t.Errorf("left %v, %d addresses: a new deadline in %v, want ctx's own", k.left, k.remaining, got)
			}
		} else if got > k.want || got < k.want-time.Second {
			t.Errorf("left %v, %d addresses: deadline in %v, want %v", k.left, k.remaining, got, k.want)
		}
		pcancel()
		cancel()
	}
	if pctx, cancel := partialContext(context.Background(), 3); pctx != context.Background() {
		t.Error("a context without a deadline was given one")
	} else {
		cancel()
	}
}
