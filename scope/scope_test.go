package scope_test

import (
	"fmt"
	"testing"

	"github.com/weftrt/weft/scope"
)

func TestIdentity(t *testing.T) {
	a, b := scope.New("same"), scope.New("same")
	if a == b {
		t.Fatal("two scopes with one name must be different prompts")
	}
	if a.Name() != "same" || b.Name() != "same" {
		t.Fatalf("names: %q %q", a.Name(), b.Name())
	}
	if got, want := a.String(), `scope "same"`; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	var nilScope *scope.Scope
	if nilScope.Name() != "<nil>" || nilScope.String() != "scope <nil>" {
		t.Fatalf("nil scope: %q %q", nilScope.Name(), nilScope.String())
	}
}

func TestEmptyNamesDistinct(t *testing.T) {
	// A zero-size struct would let the allocator hand out one address for
	// every scope; the padding byte keeps identities distinct.
	if scope.New("") == scope.New("") {
		t.Fatal("scopes with empty names share an identity")
	}
}

func ExampleNew() {
	s := scope.New("generator")
	fmt.Println(s.Name())
	fmt.Println(s)
	// Output:
	// generator
	// scope "generator"
}
