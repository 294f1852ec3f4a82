package pinning

import (
	"testing"

	"github.com/weftrt/weft/internal/rt"
)

// funcReason by name, for functions a test binary may not contain:
// runtime/secret exists only with GOEXPERIMENT=runtimesecret (the
// continuation package's TestPinSecretMode runs it there), and
// crypto/fips140.WithoutEnforcement from Go 1.26 (TestPinFIPSBypass).
func TestFuncReasonByName(t *testing.T) {
	for _, c := range []struct {
		name   string
		reason Reason
		pinned bool
	}{
		{"runtime/secret.Do", RuntimeFrame, true},
		{"runtime/secret.doHelper", RuntimeFrame, true},
		{"runtime/secret.Do.func1", RuntimeFrame, true},
		{"crypto/fips140.WithoutEnforcement", RuntimeFrame, true},
		{"crypto/fips140.Enforced", 0, false},
		{"runtime.gopanic", RuntimeFrame, true},
		{"internal/runtime/maps.(*Map).Get", RuntimeFrame, true},
		{"runtime.cgocallbackg1", NativeFrame, true},
		{"runtime.call64", 0, false},
		{"runtime.call1073741824", 0, false},
		{"runtime.reflectcall", 0, false},
		{"reflect.Value.call", 0, false},
		{"reflect.makeFuncStub", ReflectFrame, true},
		{"reflect.callReflect", ReflectFrame, true},
		{"runtime.callers", RuntimeFrame, true},
		{"runtime/pprof.Do", 0, false}, // ordinary library code
		{"runtime/trace.WithRegion", 0, false},
		{"runtimex.F", 0, false},
		{"main.main", 0, false},
	} {
		if r, pinned := funcReason(c.name, 0, 0); r != c.reason || pinned != c.pinned {
			t.Errorf("funcReason(%q) = %v, %v; want %v, %v", c.name, r, pinned, c.reason, c.pinned)
		}
	}
	// A trampoline is assembly: it pins as such if it writes SP.
	if r, pinned := funcReason("runtime.call64", rt.FlagAsm|rt.FlagSPWrite, 48); r != AssemblyFrame || !pinned {
		t.Errorf("funcReason(runtime.call64, SPWRITE) = %v, %v; want %v, true", r, pinned, AssemblyFrame)
	}
}
