#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-4
	MOVW	g, R0
	MOVW	R0, ret+0(FP)
	RET
