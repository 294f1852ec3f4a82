//go:build mips64 || mips64le

#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-8
	MOVV	g, R1
	MOVV	R1, ret+0(FP)
	RET
