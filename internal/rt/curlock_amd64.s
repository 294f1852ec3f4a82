//go:build go1.25 && !go1.28

#include "textflag.h"
#include "go_asm.h"

// func CurLockCount() uint32
//
// lockCountOf(g): the count at lockedExtOff in the goroutine's m, read
// again if g.m changed meanwhile (it cannot here, in a function the
// runtime never preempts, but the loop costs nothing when it holds).
TEXT ·CurLockCount(SB), NOSPLIT|NOFRAME, $0-4
	MOVQ	·lockedExtOff(SB), CX
	TESTQ	CX, CX
	JEQ	zero
	MOVQ	(TLS), AX
again:
	MOVQ	const_gMOffset(AX), BX
	MOVL	(BX)(CX*1), DX
	CMPQ	const_gMOffset(AX), BX
	JNE	again
	MOVL	DX, ret+0(FP)
	RET
zero:
	MOVL	$0, ret+0(FP)
	RET
