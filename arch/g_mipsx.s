//go:build mips || mipsle

#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-4
	MOVW	g, R1
	MOVW	R1, ret+0(FP)
	RET
