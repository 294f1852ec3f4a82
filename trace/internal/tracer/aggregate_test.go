package tracer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/trace/internal/target"
)

// funcs symbolizes by ranges of 0x100: 0x1000.. is "f1", 0x2000.. "f2".
type funcs map[uint64]string

func (f funcs) Symbolize(pc uint64) target.Frame {
	return target.Frame{Function: f[pc&^0xff], File: "/src/x/" + f[pc&^0xff] + ".go", Line: int(pc & 0xff), Entry: pc &^ 0xff}
}

func counted(a *Aggregator) map[Count]bool {
	m := make(map[Count]bool)
	for _, c := range a.Counts() {
		m[c] = true
	}
	return m
}

// TestAggregatorPairs checks how events pair into durations: a freeze
// ends when Run returns on the goroutine, a Yield that returns froze
// nothing, the first thaw after a mount is the resume and later ones
// are the barrier's, and a pinned park takes its pin's site.
func TestAggregatorPairs(t *testing.T) {
	sym := funcs{0x1000: "main.body", 0x2000: "main.pinner", 0x3000: "main.runner", 0x4000: "main.waker"}
	var live bytes.Buffer
	a := NewAggregator(sym, Options{LongFreeze: 50 * time.Microsecond, SlowWake: time.Millisecond}, &live)
	const g, c, vt = 0x90, 0xc0, 0x70
	us := uint64(time.Microsecond)
	for _, e := range []Event{
		{TS: 0, Kind: KindMount, G: g, Cont: c, A1: 0x3010},
		{TS: 1 * us, Kind: KindThaw, G: g, Cont: c, A1: 0x1020},
		{TS: 2 * us, Kind: KindThaw, G: g, Cont: c, A1: 0x1030},
		{TS: 10 * us, Kind: KindYield, G: g, Cont: c, A1: 0x1040},
		{TS: 70 * us, Kind: KindUnmount, G: g},
		// A pinned yield: Yield returns, and Run's return is no freeze.
		{TS: 100 * us, Kind: KindMount, G: g, Cont: c, A1: 0x3010},
		{TS: 110 * us, Kind: KindYield, G: g, Cont: c, A1: 0x2040},
		{TS: 111 * us, Kind: KindPin, G: g, Cont: c, A1: 1, A2: 0x2050},
		{TS: 112 * us, Kind: KindYieldReturn, G: g, Cont: c},
		{TS: 113 * us, Kind: KindParkPinned, G: g, Cont: c},
		{TS: 213 * us, Kind: KindParkPinnedEnd, G: g, Cont: c},
		{TS: 300 * us, Kind: KindUnmount, G: g},
		{TS: 400 * us, Kind: KindWake, VT: vt, A1: 0x4010},
		{TS: 2400 * us, Kind: KindRun, G: g, VT: vt},
		{TS: 2500 * us, Kind: KindRunEnd, G: g},
	} {
		a.Add(e)
	}
	got := counted(a)
	for _, want := range []Count{
		{KindYield, "main.body", "", 1},
		{KindThaw, "main.body", "resume", 1},
		{KindThaw, "main.body", "barrier", 1},
		{KindPin, "main.pinner", "critical section (pinning.Do)", 1},
		{KindParkPinned, "main.pinner", "", 1},
		{KindWake, "main.waker", "", 1},
		{KindRun, "", "", 1},
	} {
		if !got[want] {
			t.Errorf("no count %+v in %v", want, a.Counts())
		}
	}
	if len(got) != 7 {
		t.Errorf("counts %v, want 7", a.Counts())
	}
	for k, d := range map[histKey]time.Duration{
		{HistFreeze, "main.body"}:       60 * time.Microsecond,
		{HistThaw, "main.body"}:         time.Microsecond,
		{HistParkPinned, "main.pinner"}: 100 * time.Microsecond,
		{HistWakeToRun, "main.waker"}:   2 * time.Millisecond,
		{HistVTRun, ""}:                 100 * time.Microsecond,
	} {
		h := a.hists[k]
		if h == nil || h.n() != 1 || h.quantile(1) != d {
			t.Errorf("histogram %v: %+v, want one of %v", k, h, d)
		}
	}
	if h := a.hists[histKey{HistContRun, "main.runner"}]; h == nil || h.n() != 2 {
		t.Errorf("run slices of main.runner: %+v", h)
	}
	if a.KeysChecked != 5 || a.KeysDiffer != 0 {
		t.Errorf("keys checked %d, differ %d; want 5, 0", a.KeysChecked, a.KeysDiffer)
	}
	if len(a.Samples) != 3 {
		t.Errorf("%d samples, want a long freeze, a pin and a pinned park", len(a.Samples))
	}
	for _, s := range []string{"long freeze 60µs site=main.body", "site=main.pinner", "blocked=100µs", "slow wake-up 2ms woken by main.waker"} {
		if !strings.Contains(live.String(), s) {
			t.Errorf("no live %q in\n%s", s, live.String())
		}
	}
	var sum bytes.Buffer
	a.WriteSummary(&sum)
	for _, s := range []string{"freeze at main.body (x/main.body.go:31): n=1", "pinned-park at main.pinner"} {
		if !strings.Contains(sum.String(), s) {
			t.Errorf("no %q in the summary\n%s", s, sum.String())
		}
	}
}
