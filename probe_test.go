//go:build amd64 && !race && !msan && !asan

package weft

import (
	"testing"
)

// The start-up probe that runs a Cont through Run and Yield passes here,
// again after start-up, and leaves the backend switch as it found it.
func TestStackCopyProbeYield(t *testing.T) {
	if !useStackCopy {
		// The probe would switch the engine while other goroutines of the
		// tests may still be using the portable backend.
		t.Skip("the probe switches the engine to stack copying while it runs: " + Backend())
	}
	before := useStackCopy
	for range 3 {
		if err := probe(probeYield); err != nil {
			t.Fatal(err)
		}
		if useStackCopy != before {
			t.Fatalf("useStackCopy is %v after the probe, want %v", useStackCopy, before)
		}
	}
}
