package vnet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weftrt/weft/vnet"
)

// mustPanic returns what f panics with, as a string; the test fails if f
// does not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Errorf("did not panic")
			return
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

// DialContext and ListenContext panic on a nil ctx, naming the call, as
// net.Dialer.DialContext does and the context package asks; before any
// work, so on every platform and whatever the address, rather than a nil
// dereference somewhere below (or, for an IP literal, no panic at all).
func TestNilContextPanicsClearly(t *testing.T) {
	var nilCtx context.Context // a nil Context, as a misused caller passes it
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"DialContext", func() { vnet.DialContext(nilCtx, "tcp", "127.0.0.1:1") }},
		{"DialContext", func() { vnet.DialContext(nilCtx, "tcp", "localhost:1") }},
		{"ListenContext", func() {
			if ln, err := vnet.ListenContext(nilCtx, "tcp", "127.0.0.1:0"); err == nil {
				ln.Close()
			}
		}},
		{"ListenContext", func() {
			if ln, err := vnet.ListenContext(nilCtx, "tcp", "localhost:0"); err == nil {
				ln.Close()
			}
		}},
	} {
		if msg := mustPanic(t, tc.f); !strings.Contains(msg, "vnet: "+tc.name+" with a nil Context") {
			t.Errorf("%s(nil, ...) panicked with %q, want it named", tc.name, msg)
		}
	}
}
