#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	(TLS), AX
	MOVQ	AX, ret+0(FP)
	RET
