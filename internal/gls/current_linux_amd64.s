//go:build linux && amd64 && !race && go1.25 && !go1.28

#include "textflag.h"
#include "go_asm.h"

// func Current() *Local
//
// Current must match CurrentG(arch.GPointer()) (TestCurrentWordAndTable).
// The word is a plain uintptr in the runtime's g; word_linux_amd64.go
// says why a record there is safe. Only the calling goroutine writes its
// word, and a goroutine keeps its g wherever it runs: the load needs no
// ordering.
TEXT ·Current(SB), NOSPLIT|NOFRAME, $0-8
	CMPB	·wordOK(SB), $0
	JEQ	table
	MOVQ	(TLS), AX
	MOVQ	const_wordOffset(AX), AX
	MOVQ	AX, ret+0(FP)
	RET
table:
	// Same frame (no arguments, one result word): tableCurrent's ABI0
	// wrapper writes its result where Current's caller reads it.
	JMP	·tableCurrent(SB)

