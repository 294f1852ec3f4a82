//go:build linux && amd64 && !race && go1.25 && !go1.28

#include "textflag.h"
#include "go_asm.h"

// func Current() *Local
//
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

// func Push(l *Local) (s Slot, prev *Local)
//
// The word's previous record out, l in, and the word's address as the
// slot (Slot.w; Slot.c nil): a plain store, as storeWord's.
TEXT ·Push(SB), NOSPLIT|NOFRAME, $0-32
	CMPB	·wordOK(SB), $0
	JEQ	table
	MOVQ	(TLS), AX
	LEAQ	const_wordOffset(AX), AX
	MOVQ	(AX), BX
	MOVQ	l+0(FP), CX
	MOVQ	CX, (AX)
	MOVQ	AX, s_w+8(FP)
	MOVQ	$0, s_c+16(FP)
	MOVQ	BX, prev+24(FP)
	RET
table:
	// Same frame: tablePush's ABI0 wrapper takes l and writes its
	// results where Push's caller has them.
	JMP	·tablePush(SB)
