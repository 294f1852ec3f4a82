#include "textflag.h"
#include "funcdata.h"

// func CallGo(f func())
//
// CallGo has a frame ($8, and the frame pointer the assembler saves) and
// no stack maps of its own for it (NO_LOCAL_POINTERS): the unwinder can
// step through it, but what it holds cannot be described to the GC, which
// is what makes it an assembly frame to weft. f is called as a Go closure
// (context in DX, code at 0(DX)) with ABIInternal's fixed registers set up
// as Go code called from ABI0 assembly expects them: g in R14, zero in X15.
// The same sequence as weft's scEnter (stackcopy_amd64.s).
TEXT ·CallGo(SB), 0, $8-8
	NO_LOCAL_POINTERS
	MOVQ	f+0(FP), DX	// closure context
	MOVQ	(TLS), R14	// ABIInternal: g in R14, zero in X15
	XORPS	X15, X15
	MOVQ	0(DX), AX
	CALL	AX
	RET
