#include "textflag.h"

// The calling goroutine as a walk of its frames starts from it: its g,
// and its caller's PC and SP.

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	(TLS), AX
	MOVQ	AX, ret+0(FP)
	RET

// func CallerPCSP() (pc uintptr, sp unsafe.Pointer)
TEXT ·CallerPCSP(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	0(SP), AX	// the return address: where the caller resumes
	MOVQ	AX, pc+0(FP)
	LEAQ	8(SP), AX	// the caller's SP once CallerPCSP returns
	MOVQ	AX, sp+8(FP)
	RET
