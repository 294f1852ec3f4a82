package bench

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
)

// fixedStackStart is the GODEBUG setting benchmarks run under: every
// goroutine starts with the runtime's minimum stack (2 KiB). By default Go
// starts goroutines with the average stack size the last collection saw,
// so a goroutine peer's stack, and the memory figures of the goroutine
// and iter.Pull peers, would depend on what ran before in the process
// (the harness's deep goroutines made them start at 4 KiB: 3.4 KB per
// parked goroutine instead of 2.1 KB).
const fixedStackStart = "adaptivestackstart=0"

// reexecEnv marks the child a benchmark run started with fixedStackStart.
const reexecEnv = "WEFT_BENCH_REEXEC"

// TestMain records, when benchmarks run, which backend they measure, as a
// configuration line of the benchmark format that benchstat carries into
// its output next to goos, goarch and cpu. Benchmarks run with
// fixedStackStart: the runtime reads GODEBUG only when it starts, so the
// test binary runs itself again with it if it was not set.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		godebug := os.Getenv("GODEBUG")
		if !strings.Contains(godebug, fixedStackStart) && os.Getenv(reexecEnv) == "" {
			if code, ran := reexec(godebug); ran {
				os.Exit(code)
			}
		}
		fmt.Printf("weft-backend: %s\n", continuation.Backend())
		if strings.Contains(os.Getenv("GODEBUG"), fixedStackStart) {
			fmt.Printf("godebug: %s\n", fixedStackStart)
		}
	}
	os.Exit(m.Run())
}

// reexec runs the test binary again with fixedStackStart added to GODEBUG
// and returns its exit status; ran is false if it could not start it (no
// processes on js/wasm), and the benchmarks then run here, without it.
func reexec(godebug string) (code int, ran bool) {
	if godebug != "" {
		godebug += ","
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug+fixedStackStart, reexecEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &exit):
		return max(exit.ExitCode(), 1), true // -1: killed by a signal
	default:
		fmt.Fprintf(os.Stderr, "bench: could not run the benchmarks again with GODEBUG=%s (%v); running them without it\n", fixedStackStart, err)
		return 0, false
	}
}
