package arch_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/weftrt/weft/arch"
)

func TestGStableWithinGoroutine(t *testing.T) {
	g := arch.G()
	if g == 0 {
		t.Fatal("G() = 0")
	}
	// A deep recursion forces the stack to grow (and move); g must not change.
	var grow func(int) uintptr
	grow = func(n int) uintptr {
		var pad [128]byte
		if n == 0 {
			return arch.G() + uintptr(pad[0])
		}
		return grow(n - 1)
	}
	if got := grow(2000); got != g {
		t.Fatalf("G() changed after stack growth: %#x != %#x", got, g)
	}
	runtime.Gosched()
	if got := arch.G(); got != g {
		t.Fatalf("G() changed after Gosched: %#x != %#x", got, g)
	}
}

func TestGDistinctAcrossLiveGoroutines(t *testing.T) {
	const n = 64
	ids := make([]uintptr, n)
	var ready, release sync.WaitGroup
	ready.Add(n)
	release.Add(1)
	for i := range ids {
		go func() {
			ids[i] = arch.G()
			ready.Done()
			release.Wait() // keep every goroutine alive until all have reported
		}()
	}
	ready.Wait()
	seen := map[uintptr]int{arch.G(): -1}
	for i, id := range ids {
		if j, dup := seen[id]; dup {
			t.Fatalf("goroutines %d and %d share G() %#x", i, j, id)
		}
		seen[id] = i
	}
	release.Done()
}
