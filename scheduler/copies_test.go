package scheduler

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"

	"github.com/weftrt/weft/internal/srcfunc"
)

// The park and hand-off paths keep copies of a few functions, so that no
// frame of theirs is frozen under a park, or called on every hand-off.
// Each copy says what it must match; TestParkCopiesMatch fails when a
// copy and its original diverge.

// sourceFuncs parses the package's production files and returns their
// functions by name ("Park", "VThread.park", "Chan.sendWait").
func sourceFuncs(t *testing.T) (map[string]*ast.FuncDecl, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	funcs, err := srcfunc.Funcs(fset, "park.go", "chan.go", "waiter.go")
	if err != nil {
		t.Fatal(err)
	}
	return funcs, fset
}

// code prints nodes as Go without comments, white space or semicolons,
// for comparison.
func code(t *testing.T, fset *token.FileSet, nodes ...ast.Node) string {
	t.Helper()
	c, err := srcfunc.Code(fset, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func stmts(t *testing.T, fset *token.FileSet, list []ast.Stmt) string {
	t.Helper()
	nodes := make([]ast.Node, len(list))
	for i, s := range list {
		nodes[i] = s
	}
	return code(t, fset, nodes...)
}

// renamed runs print with every identifier from under n, but no field
// or method name, named to.
func renamed(n ast.Node, from, to string, print func() string) string {
	var ids []*ast.Ident
	var find func(n ast.Node) bool
	find = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr: // a field's or method's name is not the identifier
			ast.Inspect(n.X, find)
			return false
		case *ast.Ident:
			if n.Name == from {
				ids = append(ids, n)
			}
		}
		return true
	}
	ast.Inspect(n, find)
	for _, id := range ids {
		id.Name = to
	}
	defer func() {
		for _, id := range ids {
			id.Name = from
		}
	}()
	return print()
}

// findStmt returns the first statement under n for which match holds.
func findStmt[S ast.Stmt](t *testing.T, n ast.Node, what string, match func(S) bool) S {
	t.Helper()
	var found S
	done := false
	ast.Inspect(n, func(n ast.Node) bool {
		if s, ok := n.(S); ok && !done && match(s) {
			found, done = s, true
		}
		return !done
	})
	if !done {
		t.Fatalf("no %s", what)
	}
	return found
}

func TestParkCopiesMatch(t *testing.T) {
	funcs, fset := sourceFuncs(t)
	fn := func(name string) *ast.FuncDecl {
		t.Helper()
		f := funcs[name]
		if f == nil {
			t.Fatalf("no function %s in park.go, chan.go or waiter.go", name)
		}
		return f
	}

	// Park is its lookup of the calling virtual thread, then park.
	park := stmts(t, fset, fn("VThread.park").Body.List)
	parkBody := fn("Park").Body.List
	if len(parkBody) < 3 {
		t.Fatalf("Park has %d statements, want the lookup of vt and park's", len(parkBody))
	}
	if got := stmts(t, fset, parkBody[3:]); got != park {
		t.Errorf("Park's park differs from VThread.park:\n%s\nwant:\n%s", got, park)
	}

	// The park step itself is parkKeep, in park.
	keep := stmts(t, fset, fn("VThread.parkKeep").Body.List)
	if !strings.Contains(park, keep) {
		t.Errorf("VThread.park does not park as parkKeep does:\n%s\nwant within it:\n%s", park, keep)
	}

	// sendWait and recvWait wait with parkUntilWoken's loop, w being n.own.
	isWaitLoop := func(recv string) func(*ast.ForStmt) bool {
		return func(f *ast.ForStmt) bool {
			return f.Cond != nil && code(t, fset, f.Cond) == recv+".state.Load()==waiting"
		}
	}
	loop := code(t, fset, findStmt(t, fn("waiter.parkUntilWoken"), "loop in parkUntilWoken", isWaitLoop("w")))
	if !strings.Contains(loop, keep) {
		t.Errorf("parkUntilWoken does not park as parkKeep does:\n%s\nwant within it:\n%s", loop, keep)
	}
	for _, name := range []string{"Chan.sendWait", "Chan.recvWait"} {
		got := code(t, fset, findStmt(t, fn(name), "wait loop in "+name, isWaitLoop("n.own")))
		if got = strings.ReplaceAll(got, "n.own.", "w."); got != loop {
			t.Errorf("%s's park loop differs from parkUntilWoken's:\n%s\nwant:\n%s", name, got, loop)
		}
	}

	// Their hand-offs to a waiting partner claim and wake it as
	// chanNode.fire, waiter.claimed and VThread.unparkClaimed do.
	fire := fn("chanNode.fire").Body.List
	if len(fire) != 4 {
		t.Fatalf("chanNode.fire has %d statements, want 4 (the claim, then the stale node's)", len(fire))
	}
	claim, ok := fire[0].(*ast.IfStmt)
	if !ok || code(t, fset, claim.Cond) != "n.w.state.CompareAndSwap(waiting,woken)" || stmts(t, fset, claim.Body.List) != "n.w.claimed(n.index)returntrue" {
		t.Fatalf("chanNode.fire does not begin with its claim: %s", code(t, fset, fire[0]))
	}
	stale := stmts(t, fset, fire[1:3]) // var zero T; n.val = zero
	claimedFn := fn("waiter.claimed")
	unpark := stmts(t, fset, fn("VThread.unparkClaimed").Body.List)
	for _, c := range []struct{ name, node, list string }{
		{"Chan.sendWait", "r", "c.recvq"},
		{"Chan.recvWait", "s", "c.sendq"},
	} {
		loop := findStmt(t, fn(c.name), "hand-off loop in "+c.name, func(f *ast.ForStmt) bool {
			return f.Cond != nil && code(t, fset, f.Cond) == c.node+"!=nil" && f.Post != nil && code(t, fset, f.Post) == c.node+"="+c.list+".head"
		})
		wake := findStmt(t, loop, "claim in "+c.name, func(s *ast.IfStmt) bool {
			return s.Init != nil && code(t, fset, s.Init) == "w:="+c.node+".w"
		})
		if got := code(t, fset, wake.Cond); got != "w.state.CompareAndSwap(waiting,woken)" {
			t.Errorf("%s claims with %s, want fire's w.state.CompareAndSwap(waiting,woken)", c.name, got)
		}
		body := wake.Body.List
		if len(body) < 2 {
			t.Fatalf("%s's claim has %d statements", c.name, len(body))
		}
		claimed := renamed(claimedFn.Body, "index", c.node+".index", func() string { return stmts(t, fset, claimedFn.Body.List) })
		if !strings.Contains(claimed, "vt.unparkClaimed()") {
			t.Fatalf("waiter.claimed does not call unparkClaimed: %s", claimed)
		}
		want := strings.Replace(claimed, "vt.unparkClaimed()", unpark, 1)
		if got := stmts(t, fset, body[:len(body)-2]); got != want {
			t.Errorf("%s's wake-up differs from waiter.claimed with unparkClaimed:\n%s\nwant:\n%s", c.name, got, want)
		}
		// After a failed claim, the stale node's value is dropped, as
		// fire drops it.
		rest := loop.Body.List
		i := 0
		for i < len(rest) && rest[i] != ast.Stmt(wake) {
			i++
		}
		if got, want := stmts(t, fset, rest[i+1:]), strings.ReplaceAll(stale, "n.val", c.node+".val"); got != want {
			t.Errorf("%s's failed claim differs from fire's:\n%s\nwant:\n%s", c.name, got, want)
		}
	}
}
