package proflabel_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"testing"

	"github.com/weftrt/weft/internal/proflabel"
)

// TestGetSetMatchPprof checks that Get sees the labels pprof.Do sets, and
// that labels Set puts back are the ones pprof reports.
func TestGetSetMatchPprof(t *testing.T) {
	before := proflabel.Get()
	pprof.Do(context.Background(), pprof.Labels("k", "v"), func(ctx context.Context) {
		inside := proflabel.Get()
		if inside == nil || inside == before {
			t.Fatalf("Get inside pprof.Do = %p, before %p", inside, before)
		}
		proflabel.Set(before)
		if got := proflabel.Get(); got != before {
			t.Errorf("Get after Set = %p, want %p", got, before)
		}
		proflabel.Set(inside)
		if v, ok := pprof.Label(ctx, "k"); !ok || v != "v" {
			t.Errorf("pprof.Label = %q, %v", v, ok)
		}
	})
	if got := proflabel.Get(); got != before {
		t.Errorf("Get after pprof.Do = %p, want %p", got, before)
	}
}

// ExampleGet shows that a goroutine's labels are what pprof.Do sets.
func ExampleGet() {
	fmt.Println(proflabel.Get() != nil)
	pprof.Do(context.Background(), pprof.Labels("worker", "1"), func(context.Context) {
		fmt.Println(proflabel.Get() != nil)
	})
	// Output:
	// false
	// true
}
