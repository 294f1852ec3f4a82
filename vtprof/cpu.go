package vtprof

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"github.com/weftrt/weft"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/scheduler"
)

// The CPU profile with whole stacks. On the stack-copying backend the
// runtime's unwinder, in the signal handler, walks a virtual thread's
// live frames down to the return barrier (arch.Thaw) and goes on at the
// carrier: the frames still frozen under the barrier are missing. While
// the profile runs, every mount of a virtual thread labels the carrier
// with the thread's ID and a record of the frames frozen as it mounted
// (scheduler.RecordMounts); after the profile stops, each sample that
// ends at a barrier gets the frozen frames below its last live one, down
// to the body, and every virtual thread's sample a root frame naming the
// thread ("vthread 12 (name)") in place of the carrier's frames.

var cpu struct {
	mu   sync.Mutex
	on   bool
	w    io.Writer
	buf  bytes.Buffer
	stop func() map[string][]uintptr
}

// ErrProfiling: StartCPUProfile while a CPU profile is already on, in
// this package or in runtime/pprof.
var ErrProfiling = errors.New("vtprof: a CPU profile is already on")

// StartCPUProfile starts a CPU profile, as runtime/pprof's does, whose
// samples of virtual threads have their whole stacks (see above); it is
// written to w when StopCPUProfile is called. Each mount of a virtual
// thread costs more while it runs (docs/benchmarks.md).
func StartCPUProfile(w io.Writer) error {
	cpu.mu.Lock()
	defer cpu.mu.Unlock()
	if cpu.on {
		return ErrProfiling
	}
	stop, ok := scheduler.RecordMounts()
	if !ok {
		return ErrProfiling
	}
	cpu.buf.Reset()
	if err := pprof.StartCPUProfile(&cpu.buf); err != nil {
		stop()
		return fmt.Errorf("%w: %w", ErrProfiling, err)
	}
	cpu.on, cpu.w, cpu.stop = true, w, stop
	return nil
}

// StopCPUProfile stops the profile that StartCPUProfile started, gives its
// samples whole stacks and writes it, gzipped profile.proto.
func StopCPUProfile() error {
	cpu.mu.Lock()
	defer cpu.mu.Unlock()
	if !cpu.on {
		return errors.New("vtprof: StopCPUProfile without StartCPUProfile")
	}
	pprof.StopCPUProfile()
	mounts := cpu.stop()
	cpu.on, cpu.stop = false, nil
	w := cpu.w
	cpu.w = nil
	p, err := profile.Parse(&cpu.buf)
	if err != nil {
		return fmt.Errorf("vtprof: reading the CPU profile: %w", err)
	}
	Stitch(p, mounts)
	return p.Write(w)
}

// CPUProfile profiles the CPU for d, or until ctx ends, with whole stacks
// (StartCPUProfile), and writes the profile to w.
func CPUProfile(ctx context.Context, w io.Writer, d time.Duration) error {
	if err := StartCPUProfile(w); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return StopCPUProfile()
}

// bodyName is the name of the function at the bottom of every virtual
// thread's stack.
const bodyName = "/scheduler.vthreadBody"

// Stitch gives the samples of p, a CPU profile taken while mounts were
// recorded, their virtual threads' whole stacks, given frozen, what
// scheduler.RecordMounts' stop function returned:
// below the last live frame of a sample that ends at the return barrier,
// the frames that were frozen under it, and below the thread's body a
// root frame that names the thread, in place of the engine's and the
// carrier's frames. It drops the samples' scheduler.LabelMount labels.
//
// The frames under the barrier are those recorded at the mount, less
// those above the first of them that is the sample's last live frame: a
// thread that has returned from frames thawed since its mount, where the
// same PC is frozen twice (recursion), may get the deeper one's.
func Stitch(p *profile.Profile, frozen map[string][]uintptr) {
	b := extend(p)
	for _, smp := range p.Sample {
		keys := smp.Label[scheduler.LabelMount]
		if len(keys) == 0 {
			continue
		}
		delete(smp.Label, scheduler.LabelMount)
		below, ok := frozen[keys[0]]
		if !ok {
			continue
		}
		locs := smp.Location
		var out []*profile.Location
		barrier := -1
		for i, l := range locs {
			if weft.IsBarrierPC(uintptr(l.Address)) {
				barrier = i
				break
			}
		}
		switch {
		case barrier > 0:
			out = append(out, locs[:barrier]...)
			// A location's address is its return PC less one, as
			// runtime/pprof writes it.
			last := locs[barrier-1].Address + 1
			for j, pc := range below {
				if uint64(pc) == last {
					// below has a PC per logical frame; the live
					// location holds every function inlined in its
					// physical frame, so their PCs are skipped.
					j += len(rt.FindFunc(pc-1).LogicalPCs(pc, nil))
					out = append(out, b.pcLocs(below[j:])...)
					break
				}
			}
		case barrier < 0:
			out = locs
		default:
			continue // in the barrier itself, thawing: no frame is the thread's
		}
		end := -1
		for i, l := range out {
			if hasFunc(l, bodyName) {
				end = i
				break
			}
		}
		if end < 0 {
			continue // not in the thread's code: the carrier's, around it
		}
		root := "vthread " + first(smp.Label[scheduler.LabelThread])
		if name := first(smp.Label[scheduler.LabelName]); name != "" {
			root += " (" + name + ")"
		}
		out = append(out[:end+1:end+1], b.synthetic(root))
		smp.Location = out
	}
}

// first returns the first of values, "" if none.
func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// hasFunc reports whether l has a line in a function whose name ends in
// suffix.
func hasFunc(l *profile.Location, suffix string) bool {
	for _, ln := range l.Line {
		if ln.Function != nil && strings.HasSuffix(ln.Function.Name, suffix) {
			return true
		}
	}
	return false
}
