#include "textflag.h"

// func CallerPCSP() (pc, sp uintptr)
TEXT ·CallerPCSP(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	0(SP), AX	// the return address: where the caller resumes
	MOVQ	AX, pc+0(FP)
	LEAQ	8(SP), AX	// the caller's SP once CallerPCSP returns
	MOVQ	AX, sp+8(FP)
	RET
