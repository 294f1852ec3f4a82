package target

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/weftrt/weft/trace/internal/testbuild"
)

// TestGWordOffsetsMatchWeft checks gWordOffsets against the offsets that
// weft's internal/gls uses, one file per Go release.
func TestGWordOffsetsMatchWeft(t *testing.T) {
	files, err := filepath.Glob("../../../internal/gls/word_go1*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("weft's internal/gls/word_go1*.go: %v, %d files", err, len(files))
	}
	tag := regexp.MustCompile(`(?m)^//go:build .*\b(go1\.\d+) && !go1\.\d+`)
	off := regexp.MustCompile(`(?m)^const wordOffset = (\d+)$`)
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tm, om := tag.FindSubmatch(src), off.FindSubmatch(src)
		if tm == nil || om == nil {
			t.Fatalf("%s: no build tag or wordOffset", f)
		}
		want, _ := strconv.ParseUint(string(om[1]), 10, 64)
		if got, ok := gWordOffsets[string(tm[1])]; !ok || got != want {
			t.Errorf("gWordOffsets[%s] = %d, %v; %s says %d", tm[1], got, ok, f, want)
		}
		seen++
	}
	if seen != len(gWordOffsets) {
		t.Errorf("gWordOffsets has %d releases, weft's internal/gls %d", len(gWordOffsets), seen)
	}
}

// buildWorkload builds the tracer's test workload, with DWARF, from the
// weft tree this module sits in.
func buildWorkload(t *testing.T, ldflags string) string {
	t.Helper()
	dir := t.TempDir()
	m, err := testbuild.New(filepath.Join(dir, "mod"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "workload")
	if err := m.Build(out, testbuild.Workload, ldflags); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpen reads the workload, with DWARF and stripped: runtime.g.racectx
// from DWARF agrees with the table for the running release.
func TestOpen(t *testing.T) {
	full, err := Open(buildWorkload(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	rel := release(runtime.Version())
	if want, ok := gWordOffsets[rel]; full.GWordSource != "DWARF" || !ok || full.GWordOffset != want {
		t.Errorf("g word at %d from %s; gWordOffsets[%s] = %d, %v", full.GWordOffset, full.GWordSource, rel, want, ok)
	}
	if full.Stripped || full.GoVersion != runtime.Version() || full.WeftVersion == "" {
		t.Errorf("stripped %v, Go %q, weft %q", full.Stripped, full.GoVersion, full.WeftVersion)
	}
	stripped, err := Open(buildWorkload(t, "-s -w"))
	if err != nil {
		t.Fatal(err)
	}
	defer stripped.Close()
	if !stripped.Stripped || stripped.GWordSource != "table" || stripped.GWordOffset != full.GWordOffset {
		t.Errorf("stripped: %v, g word at %d from %s", stripped.Stripped, stripped.GWordOffset, stripped.GWordSource)
	}
	// Functions are the same from either table, but for the padding to
	// the next function, which the line table includes. (Their code may
	// differ in the displacements of data, which the build settings
	// recorded in the binary move.)
	for name, site := range map[string]Site{
		"main.pinSite":                             Returns,
		"github.com/weftrt/weft.Yield":             Returns,
		"github.com/weftrt/weft/arch.thawPop.abi0": RegisterJump,
	} {
		e1, c1, err1 := full.Code(name)
		e2, c2, err2 := stripped.Code(name)
		same := len(c1) > 0 && len(c2) >= len(c1) && strings.Trim(string(c2[len(c1):]), "\xcc") == ""
		if err1 != nil || err2 != nil || e1 != e2 || !same {
			t.Errorf("%s: %#x (%v), %#x (%v) stripped; %d and %d bytes, same %v", name, e1, err1, e2, err2, len(c1), len(c2), same)
		}
		r1, err1 := full.Offsets(name, site)
		r2, err2 := stripped.Offsets(name, site)
		if err1 != nil || err2 != nil || len(r1) == 0 || fmt.Sprint(r1) != fmt.Sprint(r2) {
			t.Errorf("%s: RETs at %v (%v), stripped %v (%v)", name, r1, err1, r2, err2)
		}
	}
	if f := stripped.Symbolize(mustEntry(t, stripped, "main.pinSite")); f.Function != "main.pinSite" || f.Line == 0 {
		t.Errorf("symbolize main.pinSite's entry: %+v", f)
	}
}

func mustEntry(t *testing.T, b *Binary, name string) uint64 {
	e, _, ok := b.Func(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return e
}

func TestRelease(t *testing.T) {
	for v, want := range map[string]string{
		"go1.26.8":                      "go1.26",
		"go1.27rc1":                     "go1.27",
		"go1.25.5 X:nodwarf5":           "go1.25",
		"go1.28-devel_abcdef Tue Jan 1": "go1.28",
	} {
		if got := release(v); got != want {
			t.Errorf("release(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestOpenRefuses checks that Open refuses what it cannot trace: a file
// without Go build information, and a Go binary without weft (this test's
// own).
func TestOpenRefuses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/bin/sh", exe} {
		if _, err := Open(path); err == nil {
			t.Errorf("Open(%s) succeeded", path)
		} else if !errorsIs(err, ErrUnsupported) {
			t.Errorf("Open(%s): %v, not ErrUnsupported", path, err)
		}
	}
	if _, err := Open("/nonexistent"); !os.IsNotExist(err) {
		t.Errorf("Open(/nonexistent): %v", err)
	}
}
