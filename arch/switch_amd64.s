//go:build amd64 && !race && !msan && !asan

#include "textflag.h"
#include "funcdata.h"
#include "go_asm.h"

// func Enter(l *Link, fn func())
//
// The body's outermost frame, or the engine's host frame on a resume,
// returns to the instruction after CALL CX; JumpBack lands there too.
// The frame's one word is fn's spill slot: an ABIInternal callee spills
// its register arguments into its caller's frame (the host spills l
// there at a stack check). Without it the host's spill would overwrite
// Enter's saved BP, and frame-pointer walks would leave the stack.
TEXT ·Enter(SB), 0, $8-16
	NO_LOCAL_POINTERS
	MOVQ	l+0(FP), AX
	MOVQ	(TLS), R14	// ABIInternal: g in R14, zero in X15
	MOVQ	8(R14), BX	// g.stack.hi
	SUBQ	SP, BX
	MOVQ	BX, Link_TopOff(AX)
	MOVQ	fn+8(FP), DX	// closure context
	XORPS	X15, X15
	MOVQ	0(DX), CX
	CALL	CX	// AX holds l: fn's first argument, if it takes one
	RET

// Thaw's frame: the argument area of the outermost thawed frame; the
// result registers of the frame that returned into it (or zeros, before
// the first record); the rethrow entry for the next thaw (0: none); and
// the argument words of the last record thawed, whose results the next
// record's innermost frame reads from its own outgoing area.
#define ARGS 0
#define REGS 256
#define RETHROW 328
#define PREV 336

// func Thaw(l *Link, rethrow uintptr, ret unsafe.Pointer)
//
// Thaw is a real frame under the thawed frames: tracebacks, the garbage
// collector and stack copying walk through it with its metadata, and its
// return address is the one its caller pushed. It never writes SP; thawPop
// does, and is entered by CALL from the one call site below, whose return
// address (BarrierPC) becomes the return address of every record's
// outermost frame.
TEXT ·Thaw(SB), 0, $344-24
	NO_LOCAL_POINTERS
	MOVQ	rethrow+8(FP), AX
	MOVQ	AX, RETHROW(SP)
	// The first record's innermost frame continues with ret in AX and
	// zeros in the other result registers. ret stays in Thaw's argument
	// words, which the collector scans, while the copy here is hidden.
	MOVQ	ret+16(FP), AX
	MOVQ	AX, (REGS+0)(SP)
	XORQ	AX, AX
	MOVQ	AX, PREV(SP)
	MOVQ	AX, (REGS+8)(SP)
	MOVQ	AX, (REGS+16)(SP)
	MOVQ	AX, (REGS+24)(SP)
	MOVQ	AX, (REGS+32)(SP)
	MOVQ	AX, (REGS+40)(SP)
	MOVQ	AX, (REGS+48)(SP)
	MOVQ	AX, (REGS+56)(SP)
	MOVQ	AX, (REGS+64)(SP)
	JMP	next
thaw:
	CALL	·thawPop(SB)
	// BarrierPC. A record's outermost frame returned here, with its
	// results in the ABIInternal result registers; keep them for the next
	// record's innermost frame, its caller.
	MOVQ	AX, (REGS+0)(SP)
	MOVQ	BX, (REGS+8)(SP)
	MOVQ	CX, (REGS+16)(SP)
	MOVQ	DI, (REGS+24)(SP)
	MOVQ	SI, (REGS+32)(SP)
	MOVQ	R8, (REGS+40)(SP)
	MOVQ	R9, (REGS+48)(SP)
	MOVQ	R10, (REGS+56)(SP)
	MOVQ	R11, (REGS+64)(SP)
next:
	MOVQ	l+0(FP), R8
	MOVQ	Link_MemTop(R8), R9
	TESTQ	R9, R9
	JEQ	done
	MOVQ	Link_Mem(R8), R10
	LEAQ	-RecordHeader__size(R10)(R9*8), R11	// R11: the last record's header
	MOVL	RecordHeader_Flags(R11), AX
	TESTL	$const_RecordMoved, AX
	JEQ	thaw
	// The record carries defer records: RelinkDefers links them, once
	// the record fits (thawPop's room check, with Thaw's SP). A record
	// that does not fit goes to thawPop first, which grows the stack and
	// returns here.
	MOVLQZX	RecordHeader_Words(R11), R13
	MOVLQZX	RecordHeader_Args(R11), AX
	SUBQ	AX, R13
	SHLQ	$3, R13
	MOVQ	SP, DI
	SUBQ	R13, DI	// DI: the record's base on the stack
	MOVQ	(TLS), R12
	MOVQ	0(R12), R12	// g.stack.lo
	ADDQ	$(const_ThawHeadroom+8), R12
	CMPQ	DI, R12
	JCS	thaw
	// RelinkDefers(l, Thaw's SP), by ABIInternal. Sixteen bytes below
	// SP are its register arguments' spill space, which would otherwise
	// be the argument area at the bottom of this frame.
	MOVQ	SP, BX
	MOVQ	R8, AX
	ADJSP	$16
	MOVQ	·RelinkDefers(SB), DX
	MOVQ	0(DX), R12
	MOVQ	(TLS), R14
	XORPS	X15, X15
	CALL	R12
	ADJSP	$-16
	MOVQ	l+0(FP), R8
	JMP	thaw
done:
	RET

// thawPop copies l's last record (R8 = l) beneath Thaw's frame, pops it,
// and jumps into its innermost frame. It is entered by Thaw's CALL, so
// 0(SP) is BarrierPC and Thaw's SP is 8(SP); BP is Thaw's frame pointer.
// It writes SP, so it has no frame and is never anywhere but innermost on
// a stack, and only until its final jump. No safe point: the result
// registers saved in Thaw's frame may hold pointers that the garbage
// collector cannot see there.
TEXT ·thawPop(SB), NOSPLIT|NOFRAME, $0-0
	MOVQ	Link_MemTop(R8), R9
	MOVQ	Link_Mem(R8), R10
	LEAQ	-RecordHeader__size(R10)(R9*8), R11	// R11: the last record's header
	MOVLQZX	RecordHeader_Words(R11), R13	// image words
	MOVLQZX	RecordHeader_Args(R11), AX	// of which argument words
	SUBQ	AX, R13
	SHLQ	$3, R13	// R13: bytes of frames
	LEAQ	8(SP), DI
	SUBQ	R13, DI	// DI: the record's base on the stack
	// Room check: base >= stack.lo + headroom (+8 for a rethrow's
	// return address).
	MOVQ	(TLS), R12
	MOVQ	0(R12), R12	// g.stack.lo
	ADDQ	$(const_ThawHeadroom+8), R12
	CMPQ	DI, R12
	JCS	short	// unsigned below: not enough room
	MOVQ	RecordHeader_Len(R11), SI
	SHLQ	$3, SI
	NEGQ	SI
	LEAQ	RecordHeader__size(R11)(SI*1), SI	// SI: the record's start
	MOVQ	DI, R12	// R12: the base
	MOVQ	0(SP), DX	// DX: BarrierPC (the copy overwrites 0(SP))
	// The frames, eight words at a time through X15, then four, two and
	// one: records are small, and REP MOVSQ costs more to start than such
	// a copy takes. X15 is the only vector register free here (X0-X14 may
	// hold the results of the frame that returned into the barrier); it
	// is zeroed again before the jump, as ABIInternal wants it. (No CALL
	// here: thawPop's callee would push its return address into the words
	// being copied.)
	MOVQ	R13, CX
	SHRQ	$3, CX	// CX: words to copy
	CMPQ	CX, $8
	JCS	copy4
copy8:
	MOVUPS	(SI), X15
	MOVUPS	X15, (DI)
	MOVUPS	16(SI), X15
	MOVUPS	X15, 16(DI)
	MOVUPS	32(SI), X15
	MOVUPS	X15, 32(DI)
	MOVUPS	48(SI), X15
	MOVUPS	X15, 48(DI)
	ADDQ	$64, SI
	ADDQ	$64, DI
	SUBQ	$8, CX
	CMPQ	CX, $8
	JCC	copy8
copy4:
	TESTQ	$4, CX
	JEQ	copy2
	MOVUPS	(SI), X15
	MOVUPS	X15, (DI)
	MOVUPS	16(SI), X15
	MOVUPS	X15, 16(DI)
	ADDQ	$32, SI
	ADDQ	$32, DI
copy2:
	TESTQ	$2, CX
	JEQ	copy1
	MOVUPS	(SI), X15
	MOVUPS	X15, (DI)
	ADDQ	$16, SI
	ADDQ	$16, DI
copy1:
	TESTQ	$1, CX
	JEQ	cdone1
	MOVQ	(SI), AX
	MOVQ	AX, (DI)
	ADDQ	$8, SI
	ADDQ	$8, DI
cdone1:
	// The results the last record's outermost frame left in Thaw's
	// argument area go to the bottom of its caller's frame, the innermost
	// of this record: where that caller reads them.
	MOVQ	(8+PREV)(SP), CX
	TESTQ	CX, CX
	JEQ	noprev
	MOVQ	SI, R9
	LEAQ	(8+ARGS)(SP), SI
	MOVQ	R12, DI
	TESTQ	CX, CX
	JEQ	cdone2
cloop2:
	MOVQ	(SI), AX
	MOVQ	AX, (DI)
	ADDQ	$8, SI
	ADDQ	$8, DI
	DECQ	CX
	JNE	cloop2
cdone2:
	MOVQ	R9, SI
noprev:
	// This record's outermost frame's arguments, into the argument area.
	MOVLQZX	RecordHeader_Args(R11), CX
	MOVQ	CX, (8+PREV)(SP)
	LEAQ	(8+ARGS)(SP), DI
	TESTQ	CX, CX
	JEQ	cdone3
cloop3:
	MOVQ	(SI), AX
	MOVQ	AX, (DI)
	ADDQ	$8, SI
	ADDQ	$8, DI
	DECQ	CX
	JNE	cloop3
cdone3:
	// SI now points at the tables.
	// Live pointers out of the stack: the last np of Ptrs.
	MOVLQZX	RecordHeader_Ptrs(R11), CX
	MOVQ	Link_PtrTop(R8), R9
	SUBQ	CX, R9
	MOVQ	R9, Link_PtrTop(R8)
	MOVQ	Link_Ptrs(R8), R10
	LEAQ	(R10)(R9*8), R10
	TESTQ	CX, CX
	JEQ	pdone
ploop:
	MOVQ	(R10), AX
	MOVLQZX	(SI), BX
	MOVQ	AX, (R12)(BX*8)
	ADDQ	$8, R10
	ADDQ	$4, SI
	DECQ	CX
	JNE	ploop
pdone:
	// Pointers into the record: base + offset.
	MOVLQZX	RecordHeader_Refs(R11), CX
rloop:
	TESTQ	CX, CX
	JEQ	rdone
	MOVLQZX	0(SI), BX
	MOVLQZX	4(SI), AX
	ADDQ	R12, AX
	MOVQ	AX, (R12)(BX*8)
	ADDQ	$8, SI
	DECQ	CX
	JMP	rloop
rdone:
	// The saved frame pointers: each slot of the chain holds the word
	// index of the next, up to the outermost's, which links to Thaw's
	// frame below.
	MOVLQZX	RecordHeader_OuterBP(R11), CX	// CX: the outermost's slot
	CMPQ	CX, $const_NoBP
	JEQ	nobp
	MOVLQZX	RecordHeader_Flags(R11), BX
	SHRQ	$const_BPShift, BX	// BX: the first slot
bploop:
	CMPQ	BX, CX
	JEQ	bpdone
	MOVQ	(R12)(BX*8), AX
	LEAQ	(R12)(AX*8), R9
	MOVQ	R9, (R12)(BX*8)
	MOVQ	AX, BX
	JMP	bploop
bpdone:
	MOVQ	BP, (R12)(CX*8)
nobp:
	// The outermost frame returns into Thaw.
	MOVQ	DX, -8(R12)(R13*1)
	// Pop the record and count it.
	MOVQ	RecordHeader_Len(R11), AX
	SUBQ	AX, Link_MemTop(R8)
	MOVLQZX	RecordHeader_Frames(R11), AX
	SHLQ	$32, AX
	ADDQ	AX, Link_Thawed(R8)
	MOVLQZX	RecordHeader_Words(R11), AX
	ADDQ	AX, Link_Thawed(R8)
	MOVLQZX	RecordHeader_BP(R11), R13
	ADDQ	R12, R13	// R13: the innermost frame's BP
	MOVQ	RecordHeader_PC(R11), DX	// DX: where it continues
	MOVQ	(TLS), R14
	XORPS	X15, X15
	MOVQ	(8+RETHROW)(SP), AX
	MOVQ	$0, (8+RETHROW)(SP)
	TESTQ	AX, AX
	JNE	rethrow
	MOVQ	(8+REGS+0)(SP), AX
	MOVQ	(8+REGS+8)(SP), BX
	MOVQ	(8+REGS+16)(SP), CX
	MOVQ	(8+REGS+24)(SP), DI
	MOVQ	(8+REGS+32)(SP), SI
	MOVQ	(8+REGS+40)(SP), R8
	MOVQ	(8+REGS+48)(SP), R9
	MOVQ	(8+REGS+56)(SP), R10
	MOVQ	(8+REGS+64)(SP), R11
	MOVQ	R12, SP
	// XCHGQ, not MOVQ: vet's framepointer check flags a MOVQ into BP in
	// a frameless function, which here is not a clobber but the restoring
	// of a saved frame pointer.
	XCHGQ	BP, R13
	JMP	DX
rethrow:
	// As if the innermost frame had called rethrow (AX) where it
	// continues.
	MOVQ	DX, -8(R12)
	LEAQ	-8(R12), SP
	XCHGQ	BP, R13
	JMP	AX
short:
	JMP	·thawShort(SB)

// thawShort is entered by JMP from thawPop when the next record does not
// fit (R13 = the bytes of its frames): its return address is BarrierPC. It grows the
// stack with growPinned, puts every result register back as it was, and
// returns into Thaw, which thaws the record again.
TEXT ·thawShort(SB), NOSPLIT, $256-0
	NO_LOCAL_POINTERS
	MOVUPS	X0, 16(SP)
	MOVUPS	X1, 32(SP)
	MOVUPS	X2, 48(SP)
	MOVUPS	X3, 64(SP)
	MOVUPS	X4, 80(SP)
	MOVUPS	X5, 96(SP)
	MOVUPS	X6, 112(SP)
	MOVUPS	X7, 128(SP)
	MOVUPS	X8, 144(SP)
	MOVUPS	X9, 160(SP)
	MOVUPS	X10, 176(SP)
	MOVUPS	X11, 192(SP)
	MOVUPS	X12, 208(SP)
	MOVUPS	X13, 224(SP)
	MOVUPS	X14, 240(SP)
	ADDQ	$(const_ThawHeadroom+4096), R13
	MOVQ	R13, 0(SP)
	CALL	·growPinned(SB)
	MOVUPS	16(SP), X0
	MOVUPS	32(SP), X1
	MOVUPS	48(SP), X2
	MOVUPS	64(SP), X3
	MOVUPS	80(SP), X4
	MOVUPS	96(SP), X5
	MOVUPS	112(SP), X6
	MOVUPS	128(SP), X7
	MOVUPS	144(SP), X8
	MOVUPS	160(SP), X9
	MOVUPS	176(SP), X10
	MOVUPS	192(SP), X11
	MOVUPS	208(SP), X12
	MOVUPS	224(SP), X13
	MOVUPS	240(SP), X14
	// Thaw's SP is above this frame, its saved BP and its return address:
	// at 272(SP).
	MOVQ	(272+REGS+0)(SP), AX
	MOVQ	(272+REGS+8)(SP), BX
	MOVQ	(272+REGS+16)(SP), CX
	MOVQ	(272+REGS+24)(SP), DI
	MOVQ	(272+REGS+32)(SP), SI
	MOVQ	(272+REGS+40)(SP), R8
	MOVQ	(272+REGS+48)(SP), R9
	MOVQ	(272+REGS+56)(SP), R10
	MOVQ	(272+REGS+64)(SP), R11
	RET

// func JumpBack(topOff uintptr)
TEXT ·JumpBack(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	topOff+0(FP), CX
	MOVQ	(TLS), R14
	MOVQ	8(R14), DX	// g.stack.hi
	SUBQ	CX, DX	// Enter's SP
	MOVQ	-8(DX), AX	// the return address into Enter
	MOVQ	-16(DX), BX	// the saved BP: Enter's BP
	XCHGQ	BP, BX	// (XCHGQ: see thawPop)
	MOVQ	DX, SP
	JMP	AX

// func StackRoom() uintptr
TEXT ·StackRoom(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	(TLS), AX
	LEAQ	8(SP), BX	// the caller's SP
	SUBQ	0(AX), BX	// less g.stack.lo
	MOVQ	BX, ret+0(FP)
	RET

// func EnterPC() uintptr
TEXT ·EnterPC(SB), NOSPLIT|NOFRAME, $0-8
	LEAQ	·Enter(SB), AX
	MOVQ	AX, ret+0(FP)
	RET

// func ThawPC() uintptr
TEXT ·ThawPC(SB), NOSPLIT|NOFRAME, $0-8
	LEAQ	·Thaw(SB), AX
	MOVQ	AX, ret+0(FP)
	RET

