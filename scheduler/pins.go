package scheduler

import (
	"sort"

	"github.com/weftrt/weft/pinning"
)

// parkPinned blocks the carrier of the virtual thread whose park could
// not suspend it, until Unpark. It takes the one argument and finds the
// virtual thread itself: the frames of Park and park, which every parked
// virtual thread has frozen, hold the argument area of their largest call,
// and a call with three words of arguments here made each two words
// larger. The go:noinline keeps it so.
//
//go:noinline
func parkPinned(perr *pinning.Error) {
	vt := Current()
	s := vt.s
	s.countPin(perr)
	// Published to unparkOn by the store of vtPinned, and the same until
	// it has sent: vt cannot leave its carrier before.
	c := vt.carrier
	c.payOwed() // what vt queued here must not wait for the monitor
	vt.state.Store(vtPinned)
	if vt.permit.Load() && vt.state.CompareAndSwap(vtPinned, vtRunning) {
		return
	}
	start, stack := s.pinBegin(vt) // profiling.go
	if c.temp {
		c.spill() // nobody steals from a compensation carrier
	}
	s.blocked.Add(1)
	c.compensated.Add(1)
	s.startTemp() // if fewer run than are blocked, up to MaxCompensation
	<-c.pinned
	c.compensated.Add(-1)
	s.blocked.Add(-1)
	s.wakeSurplusTemp()
	s.pinEnd(vt, perr, true, start, stack)
}

// PinSite identifies where virtual threads were pinned: the reason and the
// function whose frame pinned.
type PinSite struct {
	Reason   pinning.Reason // why the virtual thread could not be suspended
	Function string         // the function of the pinning.Error's Frame; "" if unknown
}

func (s *Scheduler) countPin(perr *pinning.Error) {
	site := PinSite{Reason: perr.Reason, Function: perr.Frame.Function}
	s.pinMu.Lock()
	s.pins[site]++
	s.pinMu.Unlock()
}

// PinEvent is one row of Pins.
type PinEvent struct {
	PinSite
	Count uint64 // how many parks and yields pinned there
}

// Pins returns how many times virtual threads could not be suspended when
// they parked or yielded, by reason and site, most frequent first.
func (s *Scheduler) Pins() []PinEvent {
	s.check("Pins")
	s.pinMu.Lock()
	out := make([]PinEvent, 0, len(s.pins))
	for k, v := range s.pins {
		out = append(out, PinEvent{k, v})
	}
	s.pinMu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].Reason != out[j].Reason {
			return out[i].Reason < out[j].Reason
		}
		return out[i].Function < out[j].Function
	})
	return out
}
