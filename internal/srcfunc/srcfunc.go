// Package srcfunc reads function declarations from Go source files, for
// the tests that check a copy kept for speed against its original.
package srcfunc

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"strings"
)

// Funcs parses files and returns their function declarations by name: a
// function's own name, or "Type.Method" for a method (a generic
// receiver by its type's name).
func Funcs(fset *token.FileSet, files ...string) (map[string]*ast.FuncDecl, error) {
	funcs := make(map[string]*ast.FuncDecl)
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			key := fd.Name.Name
			if fd.Recv != nil {
				typ := fd.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				switch x := typ.(type) {
				case *ast.Ident:
					key = x.Name + "." + key
				case *ast.IndexExpr:
					key = x.X.(*ast.Ident).Name + "." + key
				}
			}
			funcs[key] = fd
		}
	}
	return funcs, nil
}

// Code prints nodes as Go without comments, white space or semicolons, so
// that two pieces of code compare equal when only their layout differs.
func Code(fset *token.FileSet, nodes ...ast.Node) (string, error) {
	var b bytes.Buffer
	for _, n := range nodes {
		if err := printer.Fprint(&b, fset, n); err != nil {
			return "", err
		}
		b.WriteByte('\n')
	}
	return strings.NewReplacer(";", "", " ", "", "\t", "", "\n", "").Replace(b.String()), nil
}
