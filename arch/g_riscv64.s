#include "textflag.h"

// func getgp() unsafe.Pointer
TEXT ·getgp(SB), NOSPLIT|NOFRAME, $0-8
	MOV	g, X10
	MOV	X10, ret+0(FP)
	RET
