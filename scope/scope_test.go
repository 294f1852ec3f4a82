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

// TestInit: a scope inside a larger value is a scope of its own, with its
// name, distinct from any other.
func TestInit(t *testing.T) {
	var pair [2]struct {
		s scope.Scope
		n int
	}
	pair[0].s.Init("inside")
	pair[1].s.Init("inside")
	a, b := &pair[0].s, &pair[1].s
	if a == b || a == scope.New("inside") {
		t.Fatal("scopes made by Init share an identity")
	}
	if a.Name() != "inside" || a.String() != `scope "inside"` {
		t.Fatalf("Init's scope: %q %q", a.Name(), a.String())
	}
}

func ExampleScope_Init() {
	// A generator that holds its scope, as continuation.Pull's does.
	type generator struct {
		s    scope.Scope
		next int
	}
	g := new(generator)
	g.s.Init("counter")
	fmt.Println(&g.s)
	// Output:
	// scope "counter"
}

func ExampleNew() {
	s := scope.New("generator")
	fmt.Println(s.Name())
	fmt.Println(s)
	// Output:
	// generator
	// scope "generator"
}
