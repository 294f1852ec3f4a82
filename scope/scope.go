// Package scope provides Scope, the prompt that delimits a continuation.
//
// A continuation is created on a scope, and continuation.Yield names the
// scope to suspend: the innermost mounted continuation of that scope and
// every continuation nested inside it are suspended together. Scopes are
// identities: two scopes with the same name are different prompts, exactly
// as two distinct ContinuationScope objects are in Project Loom.
package scope

// Scope is a delimiter for continuations. A scope's identity is its
// address: create scopes with New, or with Init inside a larger value. A
// Scope is safe for concurrent use and may be shared by any number of
// continuations. It must not be copied after first use: the copy is
// another scope.
type Scope struct {
	name string
	_    byte // ensure distinct allocations never share an address
}

// New returns a new scope. The name is for diagnostics only: it appears in
// the errors that name the scope (misuse panics, *pinning.Error) and in
// String, and need not be unique.
func New(name string) *Scope {
	s := new(Scope)
	s.Init(name)
	return s
}

// Init makes s, which a larger value holds, a new scope with the given
// name, as New does, without an allocation of its own. Call it once,
// before s is used, and refer to the scope as &s from then on.
func (s *Scope) Init(name string) {
	s.name = name
}

// Name returns the name the scope was created with.
func (s *Scope) Name() string {
	if s == nil {
		return "<nil>"
	}
	return s.name
}

// String returns a description of the scope for diagnostics, such as
// `scope "generator"`.
func (s *Scope) String() string {
	if s == nil {
		return "scope <nil>"
	}
	return `scope "` + s.name + `"`
}
