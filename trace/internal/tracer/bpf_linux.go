//go:build linux

package tracer

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// struct pt_regs offsets on x86-64, as a uprobe's program sees them.
var ptRegs = map[Source]int16{
	RAX:  80,
	RBX:  40,
	RCX:  88,
	RDX:  96,
	AtSP: 152, // sp: the word is read from there
}

const (
	regR14 = 8
	regIP  = 128
	// bpfFUserStack is BPF_F_USER_STACK for bpf_get_stack.
	bpfFUserStack = 1 << 8
	// bpfRBNoWakeup is BPF_RB_NO_WAKEUP for bpf_ringbuf_submit.
	bpfRBNoWakeup = 1
)

// program assembles the BPF program of probe p: it reserves an event in
// the ring buffer events, fills it from the registers and memory of the
// probed thread, and submits it, or counts it in lost if the ring buffer
// is full. The instructions are built here, so no C compiler is needed.
func program(p Probe, events, lost *ebpf.Map, gWord uint64) (*ebpf.Program, error) {
	// R6: the pt_regs; R7: the event.
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMapPtr(asm.R1, events.FD()),
		asm.Mov.Imm(asm.R2, eventSize),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(asm.R0, 0, "lost"),
		asm.Mov.Reg(asm.R7, asm.R0),
	}
	// Ring buffer memory is not zeroed: every word is written.
	insns = append(insns, asm.Mov.Imm(asm.R1, 0))
	for off := int16(0); off < offStack; off += 8 {
		insns = append(insns, asm.StoreMem(asm.R7, off, asm.R1, asm.DWord))
	}
	insns = append(insns,
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R7, offTS, asm.R0, asm.DWord),
		asm.StoreImm(asm.R7, offKind, int64(p.Kind), asm.Word),
		asm.FnGetCurrentPidTgid.Call(),
		asm.StoreMem(asm.R7, offPIDTID, asm.R0, asm.DWord),
		asm.LoadMem(asm.R1, asm.R6, regR14, asm.DWord),
		asm.StoreMem(asm.R7, offG, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R6, regIP, asm.DWord),
		asm.StoreMem(asm.R7, offIP, asm.R1, asm.DWord),
	)
	for _, f := range []struct {
		src Source
		off int16
	}{{p.Cont, offCont}, {p.VT, offVT}, {p.A1, offA1}, {p.A2, offA2}} {
		switch f.src {
		case None:
		case GWord:
			// bpf_probe_read_user(&ev[off], 8, R14 + gWord)
			insns = append(insns,
				asm.Mov.Reg(asm.R1, asm.R7),
				asm.Add.Imm(asm.R1, int32(f.off)),
				asm.Mov.Imm(asm.R2, 8),
				asm.LoadMem(asm.R3, asm.R6, regR14, asm.DWord),
				asm.Add.Imm(asm.R3, int32(gWord)),
				asm.FnProbeReadUser.Call(),
			)
		case AtSP:
			insns = append(insns,
				asm.Mov.Reg(asm.R1, asm.R7),
				asm.Add.Imm(asm.R1, int32(f.off)),
				asm.Mov.Imm(asm.R2, 8),
				asm.LoadMem(asm.R3, asm.R6, ptRegs[AtSP], asm.DWord),
				asm.FnProbeReadUser.Call(),
			)
		default:
			reg, ok := ptRegs[f.src]
			if !ok {
				return nil, fmt.Errorf("probe %v: unknown source %d", p.Kind, f.src)
			}
			insns = append(insns,
				asm.LoadMem(asm.R1, asm.R6, reg, asm.DWord),
				asm.StoreMem(asm.R7, f.off, asm.R1, asm.DWord),
			)
		}
	}
	if p.Stack {
		insns = append(insns,
			asm.Mov.Reg(asm.R1, asm.R7),
			asm.Add.Imm(asm.R1, offRet),
			asm.Mov.Imm(asm.R2, 8),
			asm.LoadMem(asm.R3, asm.R6, ptRegs[AtSP], asm.DWord),
			asm.FnProbeReadUser.Call(),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, asm.R7),
			asm.Add.Imm(asm.R2, offStack),
			asm.Mov.Imm(asm.R3, 8*maxStack),
			asm.Mov.Imm(asm.R4, bpfFUserStack),
			asm.FnGetStack.Call(),
			asm.JSGE.Imm(asm.R0, 0, "stacked"),
			asm.Mov.Imm(asm.R0, 0),
			asm.StoreMem(asm.R7, offStackN, asm.R0, asm.Word).WithSymbol("stacked"),
		)
	}
	insns = append(insns,
		// No wake-up: Session.Run polls the ring buffer.
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Mov.Imm(asm.R2, bpfRBNoWakeup),
		asm.FnRingbufSubmit.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
		// lost[0]++
		asm.StoreImm(asm.RFP, -4, 0, asm.Word).WithSymbol("lost"),
		asm.LoadMapPtr(asm.R1, lost.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "weft_" + sanitize(p.Kind.String()),
		Type:         ebpf.Kprobe,
		Instructions: insns,
		License:      "GPL",
	})
}

// sanitize makes s a valid BPF object name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 10 {
		b = b[:10]
	}
	return string(b)
}
