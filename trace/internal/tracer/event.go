package tracer

import (
	"encoding/binary"
	"fmt"
)

// maxStack is the number of user stack frames an event carries.
const maxStack = 32

// Event layout, shared by the BPF programs (bpf_linux.go) and decode.
const (
	offTS     = 0
	offKind   = 8
	offStackN = 12 // bytes of stack written
	offPIDTID = 16
	offG      = 24
	offCont   = 32
	offVT     = 40
	offA1     = 48
	offA2     = 56
	offIP     = 64
	offRet    = 72 // the return address at the probe, with the stack
	offStack  = 80
	eventSize = offStack + 8*maxStack
)

// Event is one probe hit.
type Event struct {
	TS   uint64 // CLOCK_MONOTONIC nanoseconds
	Kind Kind
	PID  uint32
	TID  uint32
	G    uint64 // the goroutine (its runtime.g's address): R14
	Cont uint64 // the continuation's record, or 0
	VT   uint64 // the virtual thread, or 0
	// A1 and A2 are the probe's extra words: for KindPin the reason and
	// the pinning call site; for KindYield, KindMount and KindWake the
	// return address into the caller; for KindThaw where the thawed
	// frame continues.
	A1, A2 uint64
	IP     uint64   // the probed instruction
	Stack  []uint64 // user stack, innermost first, when the probe takes it
}

func decode(b []byte) (Event, error) {
	if len(b) < eventSize {
		return Event{}, fmt.Errorf("short event: %d bytes", len(b))
	}
	le := binary.LittleEndian
	pt := le.Uint64(b[offPIDTID:])
	e := Event{
		TS:   le.Uint64(b[offTS:]),
		Kind: Kind(le.Uint32(b[offKind:])),
		PID:  uint32(pt >> 32),
		TID:  uint32(pt),
		G:    le.Uint64(b[offG:]),
		Cont: le.Uint64(b[offCont:]),
		VT:   le.Uint64(b[offVT:]),
		A1:   le.Uint64(b[offA1:]),
		A2:   le.Uint64(b[offA2:]),
		IP:   le.Uint64(b[offIP:]),
	}
	if n := int(le.Uint32(b[offStackN:])) / 8; n > 0 {
		// The kernel's unwinder starts from the probed instruction and
		// then follows the frame pointers, which at a function's entry
		// are still its caller's: the caller's own return address, at
		// SP, comes second.
		n = min(n, maxStack)
		e.Stack = make([]uint64, 0, n+1)
		e.Stack = append(e.Stack, le.Uint64(b[offStack:]))
		if ret := le.Uint64(b[offRet:]); ret != 0 {
			e.Stack = append(e.Stack, ret)
		}
		for i := 1; i < n; i++ {
			e.Stack = append(e.Stack, le.Uint64(b[offStack+8*i:]))
		}
	}
	return e, nil
}
