//go:build linux

package tracer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/weftrt/weft/trace/internal/target"
)

// Config says what to trace and how.
type Config struct {
	// PID is the process to trace; 0 traces every process that runs
	// Path.
	PID int
	// Path is the executable; with a PID it may be empty (the process's
	// /proc/PID/exe).
	Path string
	// PerYield attaches the probes that fire on every yield, resume and
	// virtual-thread switch too (Probe.PerYield).
	PerYield bool
	// Stats has the kernel count the time the BPF programs take
	// (ProgramCosts), for as long as the session is open.
	Stats bool
	// RingBytes is the size of the ring buffer (a power of two, at least
	// a page); 0 means 16 MiB.
	RingBytes int
	Options
}

// Session is a set of probes attached to a target.
type Session struct {
	Bin *target.Binary
	Agg *Aggregator
	// Sites is the number of instructions probed; Functions the number
	// of functions they are in.
	Sites, Functions int
	// Absent lists the optional functions of the table that the program
	// does not have (Probe.Optional).
	Absent []string

	links        []link.Link
	progs        []*ebpf.Program
	kinds        []Kind // of progs
	stats        io.Closer
	events, lost *ebpf.Map
	reader       *ringbuf.Reader
	pidfd        int
}

// Attach reads the target's executable and attaches the probes; events
// go to a new Aggregator, whose live lines go to live. Without the
// privileges, its error matches os.ErrPermission.
func Attach(cfg Config, live io.Writer) (_ *Session, err error) {
	path := cfg.Path
	if path == "" {
		if cfg.PID <= 0 {
			return nil, errors.New("no process and no executable to trace")
		}
		path = "/proc/" + strconv.Itoa(cfg.PID) + "/exe"
	}
	bin, err := target.Open(path)
	if err != nil {
		return nil, err
	}
	if cfg.Path == "" {
		// Name the executable, not the link to it.
		if exe, err := os.Readlink(path); err == nil {
			bin.Path = exe
		}
	}
	s := &Session{Bin: bin, pidfd: -1}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if cfg.PID > 0 {
		// The process, not whatever gets its PID after it ends.
		fd, err := unix.PidfdOpen(cfg.PID, 0)
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", cfg.PID, err)
		}
		s.pidfd = fd
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising the locked-memory limit for BPF maps: %w", err)
	}
	ring := cfg.RingBytes
	if ring == 0 {
		ring = 16 << 20
	}
	s.events, err = ebpf.NewMap(&ebpf.MapSpec{Name: "weft_events", Type: ebpf.RingBuf, MaxEntries: uint32(ring)})
	if err != nil {
		return nil, fmt.Errorf("creating the ring buffer: %w", err)
	}
	s.lost, err = ebpf.NewMap(&ebpf.MapSpec{Name: "weft_lost", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("creating the lost-event counter: %w", err)
	}
	if cfg.Stats {
		s.stats, err = ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			return nil, fmt.Errorf("enabling BPF run-time statistics: %w", err)
		}
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, err
	}
	funcs := make(map[string]bool)
	for _, p := range Probes {
		if p.PerYield && !cfg.PerYield {
			continue
		}
		entry, _, ok := bin.Func(p.Symbol)
		if !ok && p.Optional {
			if !slices.Contains(s.Absent, p.Symbol) {
				s.Absent = append(s.Absent, p.Symbol)
			}
			continue
		}
		if !ok {
			return nil, fmt.Errorf("%s: %w: no function %s (a weft this tracer does not know?)", bin.Path, target.ErrUnsupported, p.Symbol)
		}
		offs, err := bin.Offsets(p.Symbol, p.Site)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", target.ErrUnsupported, err)
		}
		prog, err := program(p, s.events, s.lost, bin.GWordOffset)
		if err != nil {
			return nil, fmt.Errorf("loading the BPF program for %s: %w", p.Kind, err)
		}
		s.progs = append(s.progs, prog)
		s.kinds = append(s.kinds, p.Kind)
		for _, off := range offs {
			fo, err := bin.FileOffset(entry + off)
			if err != nil {
				return nil, err
			}
			l, err := ex.Uprobe(p.Symbol, prog, &link.UprobeOptions{Address: fo, PID: cfg.PID})
			if err != nil {
				return nil, fmt.Errorf("attaching a uprobe to %s+%#x: %w", p.Symbol, off, err)
			}
			s.links = append(s.links, l)
		}
		funcs[p.Symbol] = true
	}
	s.Sites, s.Functions = len(s.links), len(funcs)
	s.reader, err = ringbuf.NewReader(s.events)
	if err != nil {
		return nil, err
	}
	s.Agg = NewAggregator(bin, cfg.Options, live)
	return s, nil
}

// Run reads events until ctx is done or the traced process ends, then
// reads what is left in the ring buffer.
func (s *Session) Run(ctx context.Context) error {
	var rec ringbuf.Record
	read := func() error {
		for {
			if err := s.reader.ReadInto(&rec); err != nil {
				return err
			}
			e, err := decode(rec.RawSample)
			if err != nil {
				return err
			}
			s.Agg.Add(e)
		}
	}
	for ctx.Err() == nil && !s.exited() {
		s.reader.SetDeadline(time.Now().Add(50 * time.Millisecond))
		if err := read(); !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
	// What the probes wrote before the process ended or before now.
	s.reader.SetDeadline(time.Now())
	if err := read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return nil
}

// exited reports whether the traced process has ended.
func (s *Session) exited() bool {
	if s.pidfd < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(s.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// Lost returns the number of events dropped because the ring buffer was
// full.
func (s *Session) Lost() uint64 {
	var v uint64
	if s.lost != nil {
		s.lost.Lookup(uint32(0), &v)
	}
	return v
}

// Cost is what one probe's BPF program has cost: how many times it ran,
// and the kernel time it took, which the trap into the kernel and back
// for each hit comes on top of.
type Cost struct {
	Kind Kind
	Runs uint64
	Time time.Duration
}

// ProgramCosts returns the cost of each probe's program, if the session
// was attached with Config.Stats.
func (s *Session) ProgramCosts() ([]Cost, error) {
	if s.stats == nil {
		return nil, errors.New("no statistics: the session was attached without Config.Stats")
	}
	var cs []Cost
	for i, p := range s.progs {
		st, err := p.Stats()
		if err != nil {
			return nil, err
		}
		cs = append(cs, Cost{Kind: s.kinds[i], Runs: st.RunCount, Time: st.Runtime})
	}
	return cs, nil
}

// Close detaches the probes and frees what Attach made.
func (s *Session) Close() error {
	for _, l := range s.links {
		l.Close()
	}
	if s.reader != nil {
		s.reader.Close()
	}
	for _, p := range s.progs {
		p.Close()
	}
	if s.events != nil {
		s.events.Close()
	}
	if s.lost != nil {
		s.lost.Close()
	}
	if s.pidfd >= 0 {
		unix.Close(s.pidfd)
	}
	if s.stats != nil {
		s.stats.Close()
	}
	return s.Bin.Close()
}
