#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-8
	MOVV	g, R4
	MOVV	R4, ret+0(FP)
	RET
