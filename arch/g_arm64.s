#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-8
	MOVD	g, R0
	MOVD	R0, ret+0(FP)
	RET
