package target

import (
	"debug/elf"
	"errors"
	"os"
	"runtime"
	"testing"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// twoReturns has a return instruction on each of its two paths.
//
//go:noinline
func twoReturns(x int) int {
	if x > 0 {
		return x * 3
	}
	return -x
}

// TestOffsets finds the RET instructions of a function of this test's
// own binary by decoding it.
func TestOffsets(t *testing.T) {
	if twoReturns(1) != 3 {
		t.Fatal("twoReturns")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A test binary has no DWARF: the table gives the g word.
	b := &Binary{Path: exe, elf: f, GoVersion: runtime.Version()}
	if err := b.read(); err != nil {
		t.Fatal(err)
	}
	const name = "github.com/weftrt/weft/trace/internal/target.twoReturns"
	offs, err := b.Offsets(name, Returns)
	if err != nil {
		t.Fatal(err)
	}
	_, code, err := b.Code(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) < 1 {
		t.Fatalf("%s: no RET found", name)
	}
	rets := 0
	for _, c := range code {
		if c == 0xC3 {
			rets++
		}
	}
	for _, o := range offs {
		if code[o] != 0xC3 {
			t.Errorf("%s+%#x: %#x, not RET", name, o, code[o])
		}
	}
	if len(offs) > rets {
		t.Errorf("%d RETs found in %d bytes 0xC3", len(offs), rets)
	}
	if entry, err := b.Offsets(name, Entry); err != nil || len(entry) != 1 || entry[0] != 0 {
		t.Errorf("entry: %v, %v", entry, err)
	}
	if _, err := b.Offsets(name, RegisterJump); err == nil {
		t.Errorf("a jump through a register in %s", name)
	}
	if _, err := b.Offsets("no.such.function", Returns); err == nil {
		t.Error("Offsets of a function that does not exist")
	}
}
