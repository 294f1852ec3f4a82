//go:build go1.27 && !go1.28 && !wasm

package rt

import (
	"runtime"
	"testing"
)

// Go 1.27 has generic methods. The runtime prints a generic method of a
// generic type with both lists of type arguments elided, and Verify, which
// compares names with the runtime's for every function on its caller's
// stack, must agree. (weft calls Verify from its package's init, where no
// user code is on the stack; TestEveryFunctionMatchesRuntime checks every
// function of the test binary, these included.)
type pair[A any] struct{ a A }

//go:noinline
func (p pair[A]) call[B any](b B, f func() error) (string, error) {
	pc, _, _, _ := runtime.Caller(0)
	return runtime.FuncForPC(pc).Name(), f()
}

//go:noinline
func (p *pair[A]) nested[B any](b []B) string {
	pc, _, _, _ := runtime.Caller(0)
	return runtime.FuncForPC(pc).Name()
}

func TestGenericMethodNames(t *testing.T) {
	name, err := pair[int]{}.call("x", Verify)
	if err != nil {
		t.Fatalf("Verify from %s: %v", name, err)
	}
	if name != "github.com/weftrt/weft/internal/rt.pair[...].call[...]" {
		t.Errorf("the runtime names the generic method %q", name)
	}
	if got := (&pair[map[string][2]int]{}).nested([][]byte{}); got != "github.com/weftrt/weft/internal/rt.(*pair[...]).nested[...]" {
		t.Errorf("the runtime names the generic method %q", got)
	}
	for _, c := range []struct{ sym, want string }{
		{"p.pair[go.shape.int].call[go.shape.string]", "p.pair[...].call[...]"},
		{"p.(*pair[go.shape.map[string][2]int]).nested[go.shape.[]uint8]", "p.(*pair[...]).nested[...]"},
		{"p.F[go.shape.[]int]", "p.F[...]"},
		{"p.F[go.shape.int].func1", "p.F[...].func1"},
		{"p.bad[a]]b[c]", "p.bad[a]]b[c]"},
	} {
		if got := nameForPrint(c.sym); got != c.want {
			t.Errorf("nameForPrint(%q) = %q, want %q", c.sym, got, c.want)
		}
	}
}
