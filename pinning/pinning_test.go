package pinning_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/weftrt/weft/pinning"
)

func TestReasonStrings(t *testing.T) {
	seen := map[string]pinning.Reason{}
	for _, r := range pinning.Reasons() {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "pinning.Reason(") {
			t.Errorf("reason %d has no name", r)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("reasons %d and %d share the name %q", prev, r, s)
		}
		seen[s] = r
	}
	if len(seen) != 10 {
		t.Errorf("got %d reasons, want 10", len(seen))
	}
	if got := pinning.Reason(0).String(); got != "pinning.Reason(0)" {
		t.Errorf("Reason(0).String() = %q", got)
	}
	if got := pinning.Reason(200).String(); got != "pinning.Reason(200)" {
		t.Errorf("Reason(200).String() = %q", got)
	}
}

func TestErrorIsErrPinned(t *testing.T) {
	e := &pinning.Error{
		Reason: pinning.CriticalSection,
		Scope:  "gen",
		Frame:  runtime.Frame{Function: "main.f", File: "main.go", Line: 7},
	}
	var err error = fmt.Errorf("wrapped: %w", e)
	if !errors.Is(err, pinning.ErrPinned) {
		t.Fatal("errors.Is(*Error, ErrPinned) = false")
	}
	var pe *pinning.Error
	if !errors.As(err, &pe) || pe.Reason != pinning.CriticalSection {
		t.Fatal("errors.As did not recover the *Error")
	}
	msg := e.Error()
	for _, want := range []string{`"gen"`, "critical section", "main.f", "main.go:7", "WithOnPinned"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains((&pinning.Error{Reason: pinning.NativeFrame, Scope: "s"}).Error(), " at ") {
		t.Error("an Error without a frame names a location")
	}
}

func TestDoOutsideContinuation(t *testing.T) {
	calls := 0
	pinning.Do(func() {
		calls++
		pinning.Do(func() { calls++ }) // nests
	})
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want boom", r)
		}
	}()
	pinning.Do(func() { panic("boom") })
}

func ExampleDo() {
	// Outside any continuation Do simply calls f; inside one, a yield from
	// f to that continuation is pinned instead of suspending it.
	pinning.Do(func() { fmt.Println("in the critical section") })
	// Output: in the critical section
}
