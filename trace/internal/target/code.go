package target

import (
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// Site is a place in a function where a probe goes: its entry, a return
// instruction, or a jump through a register.
type Site int

// The sites.
const (
	Entry        Site = iota // the function's first instruction
	Returns                  // every RET instruction
	RegisterJump             // every JMP through a register
)

func (s Site) String() string {
	switch s {
	case Entry:
		return "entry"
	case Returns:
		return "RET"
	case RegisterJump:
		return "JMP reg"
	}
	return fmt.Sprintf("Site(%d)", int(s))
}

// Offsets returns the offsets from the entry of function name of the
// instructions at site s, found by decoding its machine code from the
// entry on. Return events come from probes on RET instructions, never
// from return probes, which rewrite the return address on the stack that
// the Go runtime copies and unwinds.
func (b *Binary) Offsets(name string, s Site) ([]uint64, error) {
	if s == Entry {
		if _, _, ok := b.Func(name); !ok {
			return nil, fmt.Errorf("%s: no function %s", b.Path, name)
		}
		return []uint64{0}, nil
	}
	_, code, err := b.Code(name)
	if err != nil {
		return nil, err
	}
	var offs []uint64
	for pc := 0; pc < len(code); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			// Padding between functions (INT3) decodes; anything else
			// means the decoding lost its way.
			return nil, fmt.Errorf("%s: decoding %s at +%#x: %w", b.Path, name, pc, err)
		}
		switch {
		case s == Returns && inst.Op == x86asm.RET:
			offs = append(offs, uint64(pc))
		case s == RegisterJump && inst.Op == x86asm.JMP:
			if _, ok := inst.Args[0].(x86asm.Reg); ok {
				offs = append(offs, uint64(pc))
			}
		}
		pc += inst.Len
	}
	if len(offs) == 0 {
		return nil, fmt.Errorf("%s: %s has no %v instruction", b.Path, name, s)
	}
	return offs, nil
}
