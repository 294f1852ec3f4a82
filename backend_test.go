package weft

import (
	"strings"
	"testing"
)

func TestSelectBackend(t *testing.T) {
	for _, tc := range []struct {
		env        string
		want       BackendName
		reasonPart string
	}{
		{"", Portable, "not part of this build"},
		{"portable", Portable, "WEFT_BACKEND=portable"},
		{"stackcopy", Portable, "WEFT_BACKEND=stackcopy was asked for"},
		{"fast", Portable, `WEFT_BACKEND="fast" is not a backend`},
	} {
		got, reason := selectBackend(tc.env)
		if got != tc.want || !strings.Contains(reason, tc.reasonPart) {
			t.Errorf("selectBackend(%q) = %q, %q; want %q, containing %q", tc.env, got, reason, tc.want, tc.reasonPart)
		}
	}
	if b := Backend(); !strings.HasPrefix(b, string(ActiveBackend())+" (") {
		t.Errorf("Backend() = %q does not start with the active backend", b)
	}
}
