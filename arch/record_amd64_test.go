//go:build amd64 && !race && !msan && !asan

package arch

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestRecordHeaderLayout checks the layout that switch_amd64.s assumes of
// RecordHeader: it reads each field at its go_asm.h offset, 32-bit fields
// with MOVLQZX and word fields with MOVQ, and finds the header a whole
// number of words before the end of the record.
func TestRecordHeaderLayout(t *testing.T) {
	wide := map[string]bool{"PC": true, "Len": true} // read with MOVQ
	typ := reflect.TypeOf(RecordHeader{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		want := uintptr(4)
		if wide[f.Name] {
			want = 8
		}
		if f.Type.Size() != want {
			t.Errorf("RecordHeader.%s is %d bytes; the assembly reads %d", f.Name, f.Type.Size(), want)
		}
		if f.Offset%want != 0 {
			t.Errorf("RecordHeader.%s at offset %d is not aligned to %d", f.Name, f.Offset, want)
		}
	}
	if len(wide) != 2 || typ.NumField() != 10 {
		t.Errorf("RecordHeader has %d fields; this test knows 10", typ.NumField())
	}
	size := unsafe.Sizeof(RecordHeader{})
	if size%8 != 0 || uintptr(RecordHeaderWords)*8 != size {
		t.Errorf("RecordHeader is %d bytes, RecordHeaderWords %d", size, RecordHeaderWords)
	}
	if off := unsafe.Offsetof(RecordHeader{}.Len); off != size-8 {
		t.Errorf("RecordHeader.Len at offset %d, want the last word (%d)", off, size-8)
	}
	if RecordDefers|RecordMoved >= 1<<BPShift || RecordDefers&RecordMoved != 0 {
		t.Errorf("RecordDefers %#x and RecordMoved %#x overlap each other or the saved-BP index at bit %d", RecordDefers, RecordMoved, BPShift)
	}
}

// TestHeaderOfAndHeaderEnding checks that both accessors find the same
// header, in a record's last words.
func TestHeaderOfAndHeaderEnding(t *testing.T) {
	rec := make([]uintptr, 3+RecordHeaderWords)
	h := HeaderOf(rec)
	h.Len = uintptr(len(rec))
	h.PC = 0x1234
	if rec[len(rec)-1] != uintptr(len(rec)) {
		t.Errorf("Len is not the record's last word: %v", rec)
	}
	end := unsafe.Add(unsafe.Pointer(&rec[0]), len(rec)*8)
	if HeaderEnding(end) != h {
		t.Errorf("HeaderEnding = %p, HeaderOf = %p", HeaderEnding(end), h)
	}
	if h.PC != rec[len(rec)-RecordHeaderWords+int(unsafe.Offsetof(h.PC)/8)] {
		t.Errorf("PC not at its offset: %v", rec)
	}
}
