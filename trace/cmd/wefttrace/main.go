//go:build linux && amd64

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weftrt/weft/trace/internal/target"
	"github.com/weftrt/weft/trace/internal/tracer"
)

// permissionMessage is what wefttrace prints when it may not attach
// uprobes; docs/tracing.md quotes it.
const permissionMessage = "wefttrace: permission denied: attaching uprobes needs root (CAP_SYS_ADMIN); CAP_BPF and CAP_PERFMON alone load the programs but cannot attach them"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wefttrace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pid := fs.Int("p", 0, "trace the process `PID`")
	yields := fs.Bool("yields", false, "also trace every yield, thaw, run slice and wake-up (costly: for short windows)")
	dur := fs.Duration("d", 0, "stop after `duration` (0: when the process ends, or at Ctrl-C)")
	prof := fs.String("profile", "", "write pins, pinned parks and long freezes with stacks as a pprof profile to `file`")
	long := fs.Duration("long-freeze", 100*time.Microsecond, "report freezes from this `duration` on (with -yields)")
	slow := fs.Duration("slow-wake", time.Millisecond, "report wake-ups that wait this `duration` to run (with -yields)")
	verbose := fs.Bool("v", false, "print a line for every event")
	quiet := fs.Bool("q", false, "print no live lines, only the summary")
	stats := fs.Bool("stats", false, "report the kernel time each probe's BPF program took per hit")
	ring := fs.Int("ring", 16, "ring buffer size in `MiB` (a power of two): events beyond what it holds unread are counted as lost")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: wefttrace [flags] -p PID | wefttrace [flags] EXECUTABLE\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := tracer.Config{
		PID:       *pid,
		PerYield:  *yields,
		RingBytes: *ring << 20,
		Stats:     *stats,
		Options:   tracer.Options{LongFreeze: *long, SlowWake: *slow, Verbose: *verbose},
	}
	if *ring <= 0 || *ring&(*ring-1) != 0 {
		fmt.Fprintf(stderr, "wefttrace: -ring %d: not a power of two\n", *ring)
		return 2
	}
	switch {
	case *pid > 0 && fs.NArg() == 0:
	case *pid == 0 && fs.NArg() == 1:
		cfg.Path = fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	var live io.Writer = stdout
	if *quiet {
		live = nil
	}
	s, err := tracer.Attach(cfg, live)
	if err != nil {
		return fail(stderr, err)
	}
	defer s.Close()
	what := s.Bin.Path
	if *pid > 0 {
		what = "process " + strconv.Itoa(*pid) + " (" + what + ")"
	}
	fmt.Fprintf(stderr, "wefttrace: attached %d probes to %d functions of %s: weft %s, %s; g word +%d (%s)%s\n",
		s.Sites, s.Functions, what, s.Bin.WeftVersion, s.Bin.GoVersion, s.Bin.GWordOffset, s.Bin.GWordSource, stripped(s.Bin))
	if len(s.Absent) > 0 {
		fmt.Fprintf(stderr, "wefttrace: not in this program, so not traced: %s\n", strings.Join(s.Absent, ", "))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	start := time.Now()
	if err := s.Run(ctx); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "\nweft trace summary: %s, %v\n", what, time.Since(start).Round(time.Millisecond))
	if n := s.Lost(); n > 0 {
		fmt.Fprintf(stdout, "LOST %d events: the ring buffer was full; counts and histograms are short\n", n)
	} else {
		fmt.Fprintf(stdout, "lost events: 0\n")
	}
	s.Agg.WriteSummary(stdout)
	if *stats {
		costs, err := s.ProgramCosts()
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "\nBPF program time per hit (the uprobe's trap comes on top):\n")
		for _, c := range costs {
			if c.Runs > 0 {
				fmt.Fprintf(stdout, "  %-15s %8d hits  %v\n", c.Kind, c.Runs, c.Time/time.Duration(c.Runs))
			}
		}
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return fail(stderr, err)
		}
		if err := tracer.WriteProfile(f, s.Bin, s.Agg.Samples, time.Since(start)); err != nil {
			f.Close()
			return fail(stderr, err)
		}
		if err := f.Close(); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stderr, "wefttrace: wrote %d samples to %s\n", len(s.Agg.Samples), *prof)
	}
	return 0
}

func stripped(b *target.Binary) string {
	if b.Stripped {
		return "; no symbol table: functions from .gopclntab"
	}
	return ""
}

// fail prints err without a stack trace, as the documented message where
// it is about privileges, and returns the exit status.
func fail(stderr io.Writer, err error) int {
	if errors.Is(err, os.ErrPermission) {
		fmt.Fprintf(stderr, "%s\n  (%v)\n", permissionMessage, err)
		return 1
	}
	fmt.Fprintf(stderr, "wefttrace: %v\n", err)
	return 1
}
