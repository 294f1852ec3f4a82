//go:build linux && amd64

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/weftrt/weft/trace/internal/testbuild"
	"github.com/weftrt/weft/trace/internal/tracer"
)

// The workload's known mix (testdata/workload).
const (
	nYields = 1000
	nPins   = 7
	nParks  = 3
	// nPingPong round trips over channels between two virtual threads,
	// while a third sleeps nSleeps times.
	nPingPong = 100
	nSleeps   = 3
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	testMod   *testbuild.Module
)

// binaries builds, once, the command, the workload from the weft tree
// this module sits in (package testbuild), and the workload stripped of
// its symbol table and DWARF. The directory is readable by everyone, for
// TestUnprivileged.
func binaries(t *testing.T) (wefttrace, workload, stripped string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "wefttrace-test")
		if buildErr != nil {
			return
		}
		if buildErr = os.Chmod(buildDir, 0o755); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, "wefttrace"), ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		if testMod, buildErr = testbuild.New(filepath.Join(buildDir, "mod")); buildErr != nil {
			return
		}
		for _, b := range []struct{ out, flags string }{
			{"workload", ""},
			{"workload-stripped", "-s -w"},
		} {
			if buildErr = testMod.Build(filepath.Join(buildDir, b.out), testbuild.Workload, b.flags); buildErr != nil {
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "wefttrace"), filepath.Join(buildDir, "workload"), filepath.Join(buildDir, "workload-stripped")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// workloadEnv is added to the workload's environment.
var workloadEnv []string

func workloadArgs() []string {
	return []string{"-yields", strconv.Itoa(nYields), "-pins", strconv.Itoa(nPins), "-parks", strconv.Itoa(nParks), "-pingpong", strconv.Itoa(nPingPong)}
}

// untraced runs the workload alone and returns its output.
func untraced(t *testing.T, workload string) string {
	t.Helper()
	cmd := exec.Command(workload, workloadArgs()...)
	cmd.Env = append(os.Environ(), workloadEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("untraced workload: %v\n%s", err, out)
	}
	return string(out)
}

// traced starts the workload, attaches wefttrace with flags to it before
// the workload starts its work, and returns the workload's output, and
// the tracer's standard output and error.
func traced(t *testing.T, wefttrace, workload string, flags ...string) (out, trace, stderr string) {
	t.Helper()
	w := exec.Command(workload, append(workloadArgs(), "-wait")...)
	w.Env = append(os.Environ(), workloadEnv...)
	stdin, err := w.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	wout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.Stderr = w.Stdout
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Process.Kill()
	r := bufio.NewReader(wout)
	if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("workload said %q, %v", line, err)
	}

	var tout, terr bytes.Buffer
	tr := exec.Command(wefttrace, append(flags, "-p", strconv.Itoa(w.Process.Pid))...)
	tr.Stdout = &tout
	errR, errW := io.Pipe()
	defer errW.Close()
	tr.Stderr = errW
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	defer tr.Process.Kill()
	attached := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(errR)
		first := true
		for s.Scan() {
			if first {
				attached <- s.Text()
				first = false
			}
			terr.WriteString(s.Text() + "\n")
		}
		close(attached)
	}()
	select {
	case line, ok := <-attached:
		if !ok || !strings.HasPrefix(line, "wefttrace: attached ") {
			tr.Wait()
			t.Fatalf("wefttrace did not attach: %q", line)
		}
		terr.WriteString(line + "\n")
	case <-time.After(2 * time.Minute):
		t.Fatal("wefttrace did not attach within 2 minutes")
	}

	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("traced workload: %v\n%s", err, rest)
	}
	// wefttrace stops once the process has ended.
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	select {
	case err := <-done:
		errW.Close()
		if err != nil {
			t.Fatalf("wefttrace: %v\n%s%s", err, terr.String(), tout.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("wefttrace did not stop when the process ended")
	}
	return string(rest), tout.String(), terr.String()
}

type countKey struct{ kind, site, detail string }

// counts parses the summary's counts.
func counts(t *testing.T, summary string) map[countKey]int {
	t.Helper()
	_, after, ok := strings.Cut(summary, "counts (kind, count, site, detail):\n")
	if !ok {
		t.Fatalf("no counts in the summary:\n%s", summary)
	}
	m := make(map[countKey]int)
	for _, line := range strings.Split(after, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(line, "  ") {
			break
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("count line %q: %v", line, err)
		}
		m[countKey{f[0], f[2], strings.Join(f[3:], " ")}] = n
	}
	return m
}

const critical = "critical section (pinning.Do)"

// checkCounts checks the counts of the workload's known events: the
// pins and pinned parks always, the yields and thaws with -yields.
func checkCounts(t *testing.T, trace string, yields bool) {
	t.Helper()
	if !strings.Contains(trace, "lost events: 0\n") {
		t.Errorf("events were lost:\n%s", trace)
	}
	got := counts(t, trace)
	want := map[countKey]int{
		{"pin", "main.pinSite", critical}:    nPins,
		{"pin", "main.parkSite", critical}:   nParks,
		{"park-pinned", "main.parkSite", ""}: nParks,
	}
	if yields {
		var checked, differ int
		_, keys, _ := strings.Cut(trace, "continuation keys: ")
		if _, err := fmt.Sscanf(keys, "%d checked against the mounted one, %d differ", &checked, &differ); err != nil || checked < 2*nYields || differ != 0 {
			t.Errorf("continuation keys: %d checked, %d differ (%v); want at least %d checked, none differing", checked, differ, err, 2*nYields)
		}
		want[countKey{"yield", "main.main.func1", ""}] = nYields
		want[countKey{"thaw", "main.main.func1", "resume"}] = nYields
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s at %s %s: %d events, want %d", k.kind, k.site, k.detail, got[k], n)
		}
	}
	for k := range got {
		if _, ok := want[k]; ok {
			continue
		}
		switch {
		case !yields:
			t.Errorf("without -yields, an event %v (a per-yield probe attached?)", k)
		case k.kind == "yield" && !strings.HasPrefix(k.site, "github.com/weftrt/weft/scheduler."):
			// The virtual threads' own yields and parks are the
			// scheduler's; a pinned yield is no freeze.
			t.Errorf("a freeze at %s, which has none", k.site)
		}
	}
	if t.Failed() {
		t.Logf("trace:\n%s", trace)
	}
}

// TestTraceWorkload traces a workload of known yields, pins and pinned
// parks with every probe of the table attached: the counts and sites are
// exact, and the program's output is that of an untraced run.
func TestTraceWorkload(t *testing.T) {
	wefttrace, workload, _ := binaries(t)
	want := untraced(t, workload)
	prof := filepath.Join(t.TempDir(), "weft.pb.gz")
	out, trace, stderr := traced(t, wefttrace, workload, "-yields", "-profile", prof)
	if out != want {
		t.Errorf("traced output:\n%s\nuntraced:\n%s", out, want)
	}
	funcs := make(map[string]bool)
	for _, p := range tracer.Probes {
		funcs[p.Symbol] = true
	}
	if !strings.Contains(stderr, fmt.Sprintf(" probes to %d functions of process ", len(funcs))) {
		t.Errorf("not every function of the table was probed:\n%s", stderr)
	}
	checkCounts(t, trace, true)
	// A sleep's end is always a wake-up; a channel's hand-off is one
	// when the other side has parked, which it may not have yet.
	var sleeps, chans int
	for k, n := range counts(t, trace) {
		switch {
		case k.kind != "vt-wake":
		case strings.Contains(k.site, ".sleepUntil."):
			sleeps += n
		case strings.Contains(k.site, ".(*Chan["):
			chans += n
		default:
			t.Errorf("a wake-up at %s: %d", k.site, n)
		}
	}
	if sleeps != nSleeps || chans == 0 || chans > 2*nPingPong {
		t.Errorf("wake-ups: %d by sleeps, want %d; %d by channels, want 1 to %d", sleeps, nSleeps, chans, 2*nPingPong)
	}
	for _, h := range []string{"freeze at main.main.func1", "thaw at main.main.func1", "pinned-park at main.parkSite", "vt-run-slice: n=", "wake-to-run at "} {
		if !strings.Contains(trace, "\n"+h) {
			t.Errorf("no histogram %q in the summary", h)
		}
	}
	for _, live := range []string{"pin ", "park-pinned-end "} {
		if !strings.Contains(trace, live) {
			t.Errorf("no live %q line", live)
		}
	}
	checkProfile(t, prof)
}

// checkProfile checks that the profile has the pins with their stacks.
func checkProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]int{}
	parks := 0
	for _, s := range p.Sample {
		switch s.Label["event"][0] {
		case "pin":
			for _, l := range s.Location {
				for _, ln := range l.Line {
					if n := ln.Function.Name; n == "main.pinSite" || n == "main.parkSite" {
						pins[n]++
					}
				}
			}
		case "park-pinned":
			parks++
			if s.Value[1] <= 0 {
				t.Errorf("pinned park of duration %d", s.Value[1])
			}
		}
	}
	if pins["main.pinSite"] != nPins || pins["main.parkSite"] != nParks || parks != nParks {
		t.Errorf("profile: pins with stacks through main.pinSite %d, main.parkSite %d, pinned parks %d; want %d, %d, %d",
			pins["main.pinSite"], pins["main.parkSite"], parks, nPins, nParks, nParks)
	}
}

// TestTraceGCStress traces every probe of the table while the collector
// runs all the time and checks every pointer it finds, and the runtime
// copies goroutine stacks at every collection: the probes must leave the
// frames they are in, which move, as they were.
func TestTraceGCStress(t *testing.T) {
	wefttrace, workload, _ := binaries(t)
	workloadEnv = []string{"GOGC=1", "GODEBUG=invalidptr=1,gccheckmark=1,clobberfree=1"}
	defer func() { workloadEnv = nil }()
	want := untraced(t, workload)
	out, trace, _ := traced(t, wefttrace, workload, "-yields", "-q")
	if out != want {
		t.Errorf("traced output:\n%s\nuntraced:\n%s", out, want)
	}
	checkCounts(t, trace, true)
}

// TestTraceDefault traces the rare events only.
func TestTraceDefault(t *testing.T) {
	wefttrace, workload, _ := binaries(t)
	want := untraced(t, workload)
	out, trace, _ := traced(t, wefttrace, workload, "-q")
	if out != want {
		t.Errorf("traced output:\n%s\nuntraced:\n%s", out, want)
	}
	checkCounts(t, trace, false)
}

// TestTraceStripped traces a binary built with -ldflags='-s -w': the
// functions come from .gopclntab, runtime.g's layout from the table.
func TestTraceStripped(t *testing.T) {
	wefttrace, _, stripped := binaries(t)
	want := untraced(t, stripped)
	out, trace, stderr := traced(t, wefttrace, stripped, "-yields")
	if out != want {
		t.Errorf("traced output:\n%s\nuntraced:\n%s", out, want)
	}
	for _, s := range []string{"(table)", "no symbol table: functions from .gopclntab"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("wefttrace did not say %q:\n%s", s, stderr)
		}
	}
	checkCounts(t, trace, true)
}

// TestUnprivileged runs wefttrace as an unprivileged user, without
// capabilities and with CAP_BPF and CAP_PERFMON only: it prints the
// documented message, and no stack trace.
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test drops root's privileges, and must run as root (CI does)")
	}
	wefttrace, workload, _ := binaries(t)
	for _, c := range []struct {
		name string
		caps []uintptr
	}{
		{"no capabilities", nil},
		{"CAP_BPF and CAP_PERFMON", []uintptr{unix.CAP_BPF, unix.CAP_PERFMON}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(wefttrace, "-d", "1s", workload)
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Credential:  &syscall.Credential{Uid: 65534, Gid: 65534},
				AmbientCaps: c.caps,
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("wefttrace as uid 65534: %v, want exit status 1\n%s", err, stderr.String())
			}
			first, cause, _ := strings.Cut(stderr.String(), "\n")
			if first != permissionMessage {
				t.Errorf("first line %q, want %q", first, permissionMessage)
			}
			if c.caps != nil && !strings.Contains(cause, "attaching a uprobe") {
				t.Errorf("with %s, wefttrace failed before attaching:\n%s", c.name, stderr.String())
			}
			if strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("a stack trace:\n%s", stderr.String())
			}
		})
	}
}

// TestTraceWithoutScheduler attaches to a program that uses continuations
// and not the scheduler (testdata/generator): the scheduler's functions
// are absent, and said to be.
func TestTraceWithoutScheduler(t *testing.T) {
	wefttrace, _, _ := binaries(t)
	generator := filepath.Join(t.TempDir(), "generator")
	if err := testMod.Build(generator, testbuild.Generator, ""); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(wefttrace, "-yields", "-d", "200ms", generator)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("wefttrace: %v\n%s", err, stderr.String())
	}
	absent := make(map[string]bool)
	for _, p := range tracer.Probes {
		if strings.Contains(p.Symbol, "/scheduler.") {
			absent[p.Symbol] = true
			if !p.Optional {
				t.Errorf("%s is not optional", p.Symbol)
			}
		}
	}
	for sym := range absent {
		if !strings.Contains(stderr.String(), sym) {
			t.Errorf("wefttrace did not say %s is absent:\n%s", sym, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "lost events: 0") {
		t.Errorf("no summary:\n%s", stdout.String())
	}
}

// TestRefuse refuses executables it cannot trace, with the reason.
func TestRefuse(t *testing.T) {
	wefttrace, _, _ := binaries(t)
	// gofmt: a Go program without weft.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	gofmt := filepath.Join(strings.TrimSpace(string(goroot)), "bin", "gofmt")
	for _, c := range []struct{ path, want string }{
		{"/bin/sh", "no Go build information"},
		{gofmt, "it does not use github.com/weftrt/weft"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(wefttrace, c.path)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("wefttrace %s: %v, want exit status 1", c.path, err)
		}
		if s := stderr.String(); !strings.Contains(s, "cannot trace this binary") || !strings.Contains(s, c.want) || strings.Contains(s, "goroutine ") {
			t.Errorf("wefttrace %s said:\n%s\nwant %q", c.path, s, c.want)
		}
	}
}
