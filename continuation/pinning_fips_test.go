//go:build go1.26

package continuation_test

import (
	"bytes"
	"crypto/fips140"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scope"
)

// TestPinFIPSBypass: a yield inside crypto/fips140.WithoutEnforcement pins
// with RuntimeFrame on the stack-copying backend. Under
// GODEBUG=fips140=only, WithoutEnforcement turns enforcement off for the
// calling goroutine, in its g, and back on as it returns: frozen and
// thawed elsewhere, its frames would leave the goroutine that ran them
// exempt (a scheduler's carrier, and every virtual thread it runs after),
// and run the rest of f enforced. The portable backend suspends the body's
// own goroutine, which keeps the exemption, and does not pin.
func TestPinFIPSBypass(t *testing.T) {
	pinCheck(t, pinScenario{
		reason: pinning.RuntimeFrame,
		provoke: func(yield func()) int {
			n := 1
			fips140.WithoutEnforcement(func() {
				n += 10
				yield()
				n += 100
			})
			return n
		},
		want: 111,
	})
}

// fipsChildEnv marks the process TestFIPSBypassStaysOnItsGoroutine starts.
const fipsChildEnv = "WEFT_FIPS_BYPASS_CHILD"

// TestFIPSBypassStaysOnItsGoroutine checks, in a process run with
// GODEBUG=fips140=only, what the exemption does around a yield inside
// WithoutEnforcement: the goroutine that ran the body is enforced again
// once Run returns, and f runs exempt to its end. (On the code before the
// pin, the goroutine that called Run stayed exempt, and so did the
// goroutine it started to resume the body, which inherited that.)
func TestFIPSBypassStaysOnItsGoroutine(t *testing.T) {
	if os.Getenv(fipsChildEnv) == "1" {
		fipsBypass(t)
		return
	}
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skipf("runs a child process: not on %s", runtime.GOOS)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFIPSBypassStaysOnItsGoroutine$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fipsChildEnv+"=1", "GODEBUG=fips140=only")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFIPSBypassStaysOnItsGoroutine")) {
		t.Fatalf("child process (GODEBUG=fips140=only): %v\n%s", err, out)
	}
}

func fipsBypass(t *testing.T) {
	if !fips140.Enforced() {
		t.Fatal("GODEBUG=fips140=only did not turn enforcement on")
	}
	s := scope.New("fips")
	var inside []bool
	c := continuation.New(s, func() {
		fips140.WithoutEnforcement(func() {
			inside = append(inside, fips140.Enforced())
			continuation.Yield(s)
			inside = append(inside, fips140.Enforced())
		})
	}, continuation.WithOnPinned(func(*continuation.Continuation, pinning.Reason) {}))
	c.Run()
	if !fips140.Enforced() {
		t.Error("after Run returned, the goroutine that ran the body is exempt from enforcement")
	}
	done := make(chan bool)
	go func() {
		for !c.IsDone() {
			c.Run()
		}
		done <- fips140.Enforced()
	}()
	if !<-done {
		t.Error("the goroutine that resumed the body is exempt from enforcement after it ended")
	}
	for i, enforced := range inside {
		if enforced {
			t.Errorf("f, at check %d, ran enforced inside WithoutEnforcement", i)
		}
	}
	if len(inside) != 2 {
		t.Errorf("f checked %d times, want 2", len(inside))
	}
}
