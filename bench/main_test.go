package bench

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/weftrt/weft/continuation"
)

// TestMain records, when benchmarks run, which backend they measure, as a
// configuration line of the benchmark format that benchstat carries into
// its output next to goos, goarch and cpu.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		fmt.Printf("weft-backend: %s\n", continuation.Backend())
	}
	os.Exit(m.Run())
}
