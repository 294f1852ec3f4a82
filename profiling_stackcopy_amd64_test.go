//go:build amd64 && !race && !msan && !asan

package weft

import (
	"runtime"
	"strings"
	"testing"

	"github.com/weftrt/weft/scope"
)

//go:noinline
func frozenLeaf(s *scope.Scope) { Yield(s) }

// frozenInlined is inlined into frozenOuter: its frame is frozenOuter's.
func frozenInlined(s *scope.Scope) { frozenLeaf(s) }

//go:noinline
func frozenOuter(s *scope.Scope) { frozenInlined(s) }

// TestFrozenPCsInlined checks that FrozenPCs gives a PC per logical frame,
// a function inlined into a frozen frame included: each PC read alone, as
// profilers read them, names one function.
func TestFrozenPCsInlined(t *testing.T) {
	s := scope.New("frozenpcs")
	c := NewCont(s, func() { frozenOuter(s) })
	c.Run(nil)
	defer c.Run(nil)
	pcs := c.FrozenPCs(nil)
	if !useStackCopy {
		if len(pcs) != 0 {
			t.Fatalf("portable backend: %d frozen PCs, want none", len(pcs))
		}
		return
	}
	var got []string
	for _, pc := range pcs {
		f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
		if i := strings.LastIndex(f.Function, ".frozen"); i >= 0 {
			got = append(got, f.Function[i+1:])
		}
	}
	want := "frozenLeaf frozenInlined frozenOuter"
	if strings.Join(got, " ") != want {
		t.Errorf("frozen functions %q, want %q", got, want)
	}
}
