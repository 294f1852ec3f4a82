package vtprof

import (
	"bytes"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// yieldDeep yields to sc n+1 yieldDeep frames deep.
//
//go:noinline
func yieldDeep(sc *scope.Scope, n int) {
	if n == 0 {
		continuation.Yield(sc)
		return
	}
	yieldDeep(sc, n-1)
}

func TestWriteContinuations(t *testing.T) {
	sc := scope.New("pool")
	conts := map[string]*continuation.Continuation{}
	for i := range 3 {
		c := continuation.New(sc, func() { yieldDeep(sc, 4) })
		c.Run()
		conts[fmt.Sprint("suspended-", i)] = c
	}
	done := continuation.New(sc, func() {})
	done.Run()
	conts["done"] = done
	conts["new"] = continuation.New(sc, func() {})
	seq := func() iter.Seq2[string, *continuation.Continuation] {
		return func(yield func(string, *continuation.Continuation) bool) {
			for _, name := range []string{"suspended-0", "suspended-1", "suspended-2", "done", "new"} {
				if !yield(name, conts[name]) {
					return
				}
			}
		}
	}

	var buf bytes.Buffer
	if err := WriteContinuations(&buf, seq(), 0); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]int64{}
	for _, smp := range p.Sample {
		st := smp.Label["state"][0]
		states[st] += smp.Value[0]
		if st == "suspended" {
			if got := countFunc(sampleFuncs(smp), ".yieldDeep"); got != 5 {
				t.Errorf("%d yieldDeep frames, want 5", got)
			}
		}
	}
	if states["suspended"] != 3 || states["done"] != 1 || states["not suspended"] != 1 {
		t.Errorf("states %v", states)
	}

	buf.Reset()
	if err := WriteContinuations(&buf, seq(), 1); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.HasPrefix(out, "continuation profile: total 5\n3 @") || strings.Count(out, ".yieldDeep+") != 5 {
		t.Errorf("debug=1:\n%s", out)
	}
	buf.Reset()
	if err := WriteContinuations(&buf, seq(), 2); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "[suspended]:\n") != 3 || strings.Count(out, ".yieldDeep(...)") != 15 || !strings.Contains(out, `continuation "done" [done]:`) {
		t.Errorf("debug=2:\n%s", out)
	}
	for _, c := range conts {
		for !c.IsDone() {
			c.Run()
		}
	}
}
