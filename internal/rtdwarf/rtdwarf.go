// Package rtdwarf gives tests the runtime's own DWARF type information, to
// check weft's mirrors of runtime structures (internal/rt, internal/gls)
// against the release that built them. A test binary has no DWARF (go test
// links without it), so Runtime builds a small program with the toolchain
// that built the test, and reads its.
package rtdwarf

import (
	"debug/buildinfo"
	"debug/dwarf"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Runtime returns the DWARF data of a program built with the go command
// of the toolchain that built the calling test. It skips the test, saying
// why, where that cannot be done: off linux (it reads an ELF file), or
// without that toolchain's go command (a -trimpath test binary run by
// hand, with another release on PATH).
func Runtime(t testing.TB) *dwarf.Data {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("reads DWARF from an ELF file: linux only, this is %s", runtime.GOOS)
	}
	// The go command of the toolchain that built this test: in GOROOT,
	// which go test sets; else on PATH, which must then be the same
	// release.
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gocmd); runtime.GOROOT() == "" || err != nil {
		if gocmd, err = exec.LookPath("go"); err != nil {
			t.Skipf("needs the go command of %s, to build a program with DWARF: %v", runtime.Version(), err)
		}
	}
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "main.go"), filepath.Join(dir, "prog")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gocmd, "build", "-ldflags=", "-o", exe, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=", "GO111MODULE=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if bi.GoVersion != runtime.Version() {
		t.Skipf("needs the go command of %s; %s builds with %s", runtime.Version(), gocmd, bi.GoVersion)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatalf("the program has no DWARF: %v", err)
	}
	return d
}

// Struct returns the struct type named name (such as "runtime.g") in d,
// failing the test if there is none.
func Struct(t testing.TB, d *dwarf.Data, name string) *dwarf.StructType {
	t.Helper()
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			t.Fatalf("no %s in the program's DWARF", name)
		}
		if e.Tag != dwarf.TagStructType || e.Val(dwarf.AttrName) != name {
			continue
		}
		typ, err := d.Type(e.Offset)
		if err != nil {
			t.Fatal(err)
		}
		return typ.(*dwarf.StructType)
	}
}

// Field returns the field of s named name, failing the test if there is
// none.
func Field(t testing.TB, s *dwarf.StructType, name string) *dwarf.StructField {
	t.Helper()
	for _, f := range s.Field {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("%s has no field %s", s.StructName, name)
	return nil
}
