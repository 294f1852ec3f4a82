package weft

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"strings"
	"testing"
)

// sourceCode prints nodes as Go without comments, white space or
// semicolons, for comparison.
func sourceCode(t *testing.T, fset *token.FileSet, nodes ...ast.Node) string {
	t.Helper()
	var b bytes.Buffer
	for _, n := range nodes {
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		b.WriteByte('\n')
	}
	return strings.NewReplacer(";", "", " ", "", "\t", "", "\n", "").Replace(b.String())
}

// sourceFunc returns the function or method (as "Type.Method") named name
// in the package file file.
func sourceFunc(t *testing.T, fset *token.FileSet, file, name string) *ast.FuncDecl {
	t.Helper()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
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
			key = typ.(*ast.Ident).Name + "." + key
		}
		if key == name {
			return fd
		}
	}
	t.Fatalf("%s: no func %s", file, name)
	return nil
}

// TestMountPassMatchesRun checks that stackState.run, which the tests and the
// start-up probe drive, is the same pass as mount's loop runs: the same
// enter or thaw, and the same test that the body returned.
func TestMountPassMatchesRun(t *testing.T) {
	fset := token.NewFileSet()
	mount := sourceFunc(t, fset, "thaw_amd64.go", "Cont.mount")
	run := sourceFunc(t, fset, "thaw_amd64.go", "stackState.run")
	if len(run.Body.List) != 3 {
		t.Fatalf("stackState.run has %d statements; this test knows 3", len(run.Body.List))
	}
	pass := sourceCode(t, fset, run.Body.List[0], run.Body.List[1])
	done := sourceCode(t, fset, run.Body.List[2].(*ast.IfStmt).Cond, run.Body.List[2].(*ast.IfStmt).Body.List[0])
	foundPass, foundDone := false, false
	ast.Inspect(mount.Body, func(n ast.Node) bool {
		b, ok := n.(*ast.BlockStmt)
		if !ok {
			return true
		}
		for i, st := range b.List {
			if i+1 < len(b.List) && sourceCode(t, fset, st, b.List[i+1]) == pass {
				foundPass = true
			}
			if is, ok := st.(*ast.IfStmt); ok && len(is.Body.List) > 0 && sourceCode(t, fset, is.Cond, is.Body.List[0]) == done {
				foundDone = true
			}
		}
		return true
	})
	if !foundPass {
		t.Errorf("mount's loop has no pass matching stackState.run's:\n%s", pass)
	}
	if !foundDone {
		t.Errorf("mount's loop has no end-of-body test matching stackState.run's:\n%s", done)
	}
}
