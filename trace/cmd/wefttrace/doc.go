// Command wefttrace traces a running program that uses weft, without
// rebuilding or restarting it: it attaches uprobes, programmed in eBPF, to
// weft's functions in the program's executable and reports its
// continuations' and virtual threads' pins, pinned parks, freezes, thaws,
// run slices and wake-ups, with latency histograms by call site.
//
// Usage:
//
//	wefttrace [flags] -p PID
//	wefttrace [flags] /path/to/executable
//
// By default it traces the rare events: pinned yields and pinned parks.
// -yields adds the probes that fire on every yield, resume and
// virtual-thread switch, which cost microseconds each: use it for short
// windows (-d). It stops at -d, at Ctrl-C, or when the process ends, and
// prints a summary; -profile writes the pins, pinned parks and long
// freezes, with stacks, as a pprof profile.
//
// It runs on Linux (amd64) only, as root (CAP_SYS_ADMIN). docs/tracing.md
// describes its output and what it costs the traced program.
package main
