//go:build linux && amd64

package tracer

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/weftrt/weft/trace/internal/testbuild"
)

// TestSessionByPath attaches to an executable rather than a process, so
// that the probes fire in every process that runs it, then runs the
// workload: every row of Probes is attached, and the pins' counts are
// exact.
func TestSessionByPath(t *testing.T) {
	dir := t.TempDir()
	m, err := testbuild.New(filepath.Join(dir, "mod"))
	if err != nil {
		t.Fatal(err)
	}
	workload := filepath.Join(dir, "workload")
	if err := m.Build(workload, testbuild.Workload, ""); err != nil {
		t.Fatal(err)
	}
	s, err := Attach(Config{Path: workload, PerYield: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Absent) != 0 {
		t.Errorf("absent from the workload: %v", s.Absent)
	}
	sites := 0
	for _, p := range Probes {
		offs, err := s.Bin.Offsets(p.Symbol, p.Site)
		if err != nil {
			t.Fatal(err)
		}
		sites += len(offs)
	}
	if s.Sites != sites {
		t.Errorf("%d sites attached, want %d", s.Sites, sites)
	}

	if out, err := exec.Command(workload, "-pins", "5", "-parks", "2", "-yields", "10").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	// The process has ended: Run reads what its probes wrote and returns.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Lost(); n != 0 {
		t.Errorf("%d events lost", n)
	}
	want := map[Count]bool{
		{KindPin, "main.pinSite", reason(1), 5}:  true,
		{KindPin, "main.parkSite", reason(1), 2}: true,
		{KindParkPinned, "main.parkSite", "", 2}: true,
		{KindYield, "main.main.func1", "", 10}:   true,
	}
	for _, c := range s.Agg.Counts() {
		delete(want, c)
	}
	if len(want) != 0 {
		t.Errorf("counts %v lack %v", s.Agg.Counts(), want)
	}
}
