package tracer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestReasonNames checks reasonNames against weft's pinning package in
// the tree this module sits in: the constants' order and their names.
func TestReasonNames(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../../pinning/pinning.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	value := make(map[string]int) // the Reason constants
	names := make(map[string]string)
	ast.Inspect(f, func(n ast.Node) bool {
		switch d := n.(type) {
		case *ast.GenDecl:
			if d.Tok != token.CONST {
				return true
			}
			iota := false
			for i, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Reason" && len(vs.Values) == 1 {
					// Reason = iota + 1
					iota = true
				}
				if iota {
					for _, name := range vs.Names {
						value[name.Name] = i + 1
					}
				}
			}
		case *ast.ValueSpec:
			if len(d.Names) != 1 || d.Names[0].Name != "reasonNames" {
				return true
			}
			for _, e := range d.Values[0].(*ast.CompositeLit).Elts {
				kv := e.(*ast.KeyValueExpr)
				s, err := strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				names[kv.Key.(*ast.Ident).Name] = s
			}
		}
		return true
	})
	if len(names) == 0 || len(names) != len(value) {
		t.Fatalf("pinning.go: %d reasons, %d names", len(value), len(names))
	}
	if len(names) != len(reasonNames)-1 {
		t.Errorf("pinning has %d reasons, the tracer %d", len(names), len(reasonNames)-1)
	}
	for c, v := range value {
		if v >= len(reasonNames) || reasonNames[v] != names[c] {
			t.Errorf("pinning.%s = %d, %q; the tracer's reason(%d) = %q", c, v, names[c], v, reason(uint64(v)))
		}
	}
}
