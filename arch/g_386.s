#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-4
	MOVL	(TLS), AX
	MOVL	AX, ret+0(FP)
	RET
