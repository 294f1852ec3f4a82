// Package testbuild builds the programs that the tracer's tests trace,
// from the weft tree that the tracer's module sits in: in a module of
// their own that replaces weft with that tree, so that the tracer's
// module itself does not require weft.
package testbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Workload is the package of the tracer's test workload, in the module
// that New makes.
const Workload = "./workload"

// Generator is the package of a program that uses continuations and not
// the scheduler, in the module that New makes.
const Generator = "./generator"

// Module is a module, in a directory of its own, that builds weft's
// packages and the test workload from the weft tree.
type Module struct {
	Dir  string // the module's directory
	Weft string // the weft tree
}

// New makes the module in dir. It finds the weft tree above the tracer's
// module, which holds the working directory.
func New(dir string) (*Module, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	trace := filepath.Dir(strings.TrimSpace(string(out)))
	weft := filepath.Dir(trace)
	mod, err := os.ReadFile(filepath.Join(weft, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/weftrt/weft\n")) {
		return nil, fmt.Errorf("%s is not the weft tree (%v)", weft, err)
	}
	m := &Module{Dir: dir, Weft: weft}
	goMod := "module weft-trace-test\n\ngo 1.25.0\n\nrequire github.com/weftrt/weft v0.0.0\n\nreplace github.com/weftrt/weft => " + weft + "\n"
	sum, err := os.ReadFile(filepath.Join(weft, "go.sum"))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum}
	for _, prog := range []string{Workload, Generator} {
		main, err := os.ReadFile(filepath.Join(trace, "testdata", prog, "main.go"))
		if err != nil {
			return nil, err
		}
		files[filepath.Join(prog, "main.go")] = main
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Build builds package pkg (Workload, Generator, or a package of weft) to out, with
// the linker flags ldflags.
func (m *Module) Build(out, pkg, ldflags string) error {
	cmd := exec.Command("go", "build", "-mod=mod", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = m.Dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
