//go:build amd64 && !race && !msan && !asan

#include "textflag.h"
#include "funcdata.h"
#include "go_asm.h"

// func Enter(ctx unsafe.Pointer, fn func(), thaw bool, plan *ThawPlan)
//
// The body's outermost frame returns to the instruction after CALL AX,
// whether the body was called here or thawed below this frame: both paths
// run in this function's one frame, so that return address is valid on
// every goroutine.
TEXT ·Enter(SB), 0, $0-32
	NO_LOCAL_POINTERS
	MOVBLZX	thaw+16(FP), AX
	TESTQ	AX, AX
	JNE	thaw
	MOVQ	fn+8(FP), DX	// closure context
	MOVQ	(TLS), R14	// ABIInternal: g in R14, zero in X15
	XORPS	X15, X15
	MOVQ	0(DX), AX
	CALL	AX
	// The body returned, or JumpBack landed here.
	RET

thaw:
	MOVQ	plan+24(FP), R8
	// Copy the image to [SP-size, SP): the region's top is this frame's SP.
	MOVQ	ThawPlan_N(R8), CX
	MOVQ	CX, R9
	SHLQ	$3, R9
	MOVQ	SP, DI
	SUBQ	R9, DI
	MOVQ	DI, R10	// R10: the region's new base
	// Room check, after the last safe point: base >= stack.lo + headroom.
	MOVQ	(TLS), R11
	MOVQ	0(R11), R12	// g.stack.lo
	ADDQ	$const_ThawHeadroom, R12
	CMPQ	DI, R12
	JCS	short	// unsigned below: not enough room
	MOVQ	ThawPlan_Words(R8), SI
	CLD
	REP;	MOVSQ
	// Live pointers out of the stack.
	MOVQ	ThawPlan_NP(R8), CX
	MOVQ	ThawPlan_Ptrs(R8), SI
	MOVQ	ThawPlan_PtrAt(R8), DX
ploop:
	TESTQ	CX, CX
	JEQ	pdone
	MOVQ	(SI), AX
	MOVL	(DX), BX
	MOVQ	AX, (R10)(BX*8)
	ADDQ	$8, SI
	ADDQ	$4, DX
	DECQ	CX
	JMP	ploop
pdone:
	// Pointers into the region: base + offset.
	MOVQ	ThawPlan_NR(R8), CX
	MOVQ	ThawPlan_Refs(R8), SI
rloop:
	TESTQ	CX, CX
	JEQ	rdone
	MOVL	0(SI), BX
	MOVL	4(SI), AX
	ADDQ	R10, AX
	MOVQ	AX, (R10)(BX*8)
	ADDQ	$8, SI
	DECQ	CX
	JMP	rloop
rdone:
	// The outermost frame's saved BP is this frame's BP.
	MOVQ	ThawPlan_OuterBP(R8), BX
	CMPQ	BX, $-1
	JEQ	nobp
	MOVQ	BP, (R10)(BX*8)
nobp:
	MOVQ	ThawPlan_BP0(R8), BX
	ADDQ	R10, BX
	MOVQ	ThawPlan_PC0(R8), AX
	MOVQ	R10, CX
	JMP	·jump(SB)

short:
	MOVQ	$1, ThawPlan_Short(R8)
	RET

// jump: SP = CX, BP = BX, then continue at AX in the innermost thawed
// frame as if its call to capture had returned a nil error (AX = BX = 0).
// It writes SP, so it has no frame and is entered by JMP: it is never on
// the stack.
//
// BP is set with XCHGQ BP, BX: vet's framepointer check flags a MOVQ into BP in a
// frameless function, which here is not a clobber but the restoring of a
// saved frame pointer.
TEXT ·jump(SB), NOSPLIT|NOFRAME, $0-0
	MOVQ	CX, SP
	XCHGQ	BP, BX
	MOVQ	AX, R8
	XORQ	AX, AX
	XORQ	BX, BX
	MOVQ	(TLS), R14
	XORPS	X15, X15
	JMP	R8

// func JumpBack(topOff uintptr)
TEXT ·JumpBack(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	topOff+0(FP), CX
	MOVQ	(TLS), R14
	MOVQ	8(R14), DX	// g.stack.hi
	SUBQ	CX, DX	// Enter's SP
	MOVQ	-8(DX), AX	// the body's return address, into Enter
	MOVQ	-16(DX), BX	// the body's saved BP: Enter's BP
	XCHGQ	BP, BX	// (XCHGQ: see jump)
	MOVQ	DX, SP
	JMP	AX

// func EnterPC() uintptr
TEXT ·EnterPC(SB), NOSPLIT|NOFRAME, $0-8
	LEAQ	·Enter(SB), AX
	MOVQ	AX, ret+0(FP)
	RET
