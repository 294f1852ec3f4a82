package weft

import (
	"runtime"
	"strings"
	"testing"
)

func TestSelectBackend(t *testing.T) {
	def, defReason := StackCopying, "self-check and probe passed"
	askReason := "WEFT_BACKEND=stackcopy; the runtime self-check"
	if err := stackCopyReady(); err != nil {
		def, defReason = Portable, err.Error()
		askReason = "WEFT_BACKEND=stackcopy was asked for, but " + err.Error()
	}
	if stackCopyBuilt && instrumented == "" && runtime.GOOS == "linux" && def != StackCopying {
		t.Errorf("the stack-copying backend is built here but refused: %s", defReason)
	}
	for _, tc := range []struct {
		env        string
		want       BackendName
		reasonPart string
	}{
		{"", def, defReason},
		{"portable", Portable, "WEFT_BACKEND=portable"},
		{"stackcopy", def, askReason},
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
