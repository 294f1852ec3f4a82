//go:build go1.25 && !go1.28 && !wasm

package rt

import (
	"debug/dwarf"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/weftrt/weft/internal/rtdwarf"
)

// Every mirror of a runtime structure must have the runtime's layout for
// the release that built it, as the runtime's own DWARF type information
// gives it: each mirrored field at the runtime field's offset and of its
// size. Verify checks the mirrors at start-up by what the runtime does;
// this checks them field by field, in every release the build tags admit.
func TestMirrorsMatchDWARF(t *testing.T) {
	d := rtdwarf.Runtime(t)
	for _, m := range []struct {
		runtime string
		mirror  any
		rename  map[string]string // mirror field -> runtime field path
	}{
		{"runtime.g", G{}, map[string]string{"StackLo": "stack.lo", "StackHi": "stack.hi", "Panic": "_panic", "Defer": "_defer"}},
		{"runtime._defer", Defer{}, map[string]string{"SP": "sp", "PC": "pc"}},
		{"runtime.moduledata", moduledata{}, nil},
		{"runtime._func", _func{}, nil},
		{"runtime.functab", functab{}, nil},
		{"runtime.textsect", textsect{}, nil},
		{"runtime.inlinedCall", inlinedCall{}, nil},
		{"runtime.stackmap", stackmap{}, nil},
		{"runtime.stackObjectRecord", StackObject{}, nil},
	} {
		s := rtdwarf.Struct(t, d, m.runtime)
		if s.Size() < int64(reflect.TypeOf(m.mirror).Size()) {
			t.Errorf("%s is %d bytes; its mirror %T is %d", m.runtime, s.Size(), m.mirror, reflect.TypeOf(m.mirror).Size())
		}
		for _, f := range flatFields(reflect.TypeOf(m.mirror), 0) {
			name, ok := m.rename[f.name]
			if !ok {
				name = lowerFirst(f.name)
			}
			off, size := fieldAt(t, s, name)
			if off != int64(f.off) || size != int64(f.size) {
				t.Errorf("%s.%s is %d bytes at offset %d; the mirror %T.%s is %d bytes at %d", m.runtime, name, size, off, m.mirror, f.name, f.size, f.off)
			}
		}
	}

	// The searches for g.lockedm and m.lockedExt read only within the
	// objects.
	g, mt := rtdwarf.Struct(t, d, "runtime.g"), rtdwarf.Struct(t, d, "runtime.m")
	if off, _ := fieldAt(t, g, "m"); off != int64(gMOffset) {
		t.Errorf("runtime.g.m is at offset %d; gMOffset is %d", off, gMOffset)
	}
	if g.Size() < int64(gMOffset+gScanBytes) {
		t.Errorf("runtime.g is %d bytes; lockedmOffset reads %d", g.Size(), gMOffset+gScanBytes)
	}
	if off, _ := fieldAt(t, g, "lockedm"); off >= int64(gMOffset+gScanBytes) {
		t.Errorf("runtime.g.lockedm is at offset %d, beyond the %d bytes lockedmOffset reads", off, gMOffset+gScanBytes)
	}
	if mt.Size() < mScanBytes {
		t.Errorf("runtime.m is %d bytes; lockedExtOffset reads %d", mt.Size(), mScanBytes)
	}
	if off, _ := fieldAt(t, mt, "lockedExt"); off+4 > mScanBytes {
		t.Errorf("runtime.m.lockedExt is at offset %d, beyond the %d bytes lockedExtOffset reads", off, mScanBytes)
	}
}

type mirrorField struct {
	name      string
	off, size uintptr
}

// flatFields lists the named fields of struct type t, those of embedded
// structs in place, at their offsets from base.
func flatFields(t reflect.Type, base uintptr) []mirrorField {
	var out []mirrorField
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Anonymous:
			out = append(out, flatFields(f.Type, base+f.Offset)...)
		case f.Name != "_":
			out = append(out, mirrorField{f.Name, base + f.Offset, f.Type.Size()})
		}
	}
	return out
}

// fieldAt returns the offset and size of the field at path ("a.b": field b
// of struct field a) in s.
func fieldAt(t *testing.T, s *dwarf.StructType, path string) (off, size int64) {
	t.Helper()
	for {
		head, rest, nested := strings.Cut(path, ".")
		f := rtdwarf.Field(t, s, head)
		off += f.ByteOffset
		if !nested {
			return off, f.Type.Size()
		}
		typ := f.Type
		for {
			td, ok := typ.(*dwarf.TypedefType)
			if !ok {
				break
			}
			typ = td.Type
		}
		inner, ok := typ.(*dwarf.StructType)
		if !ok {
			t.Fatalf("%s.%s is not a struct", s.StructName, head)
		}
		s, path = inner, rest
	}
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}
