//go:build amd64 && !race && !msan && !asan

package arch

import "unsafe"

// RecordHeader is the header that ends every record of a chunk. It is the
// record header's one definition: the engine writes it through this type
// and Thaw reads it through go_asm.h's RecordHeader_ offsets.
//
// The image ends with the outermost frame's arguments, which live in its
// caller's frame: the argument area at the bottom of Thaw's frame, where
// Thaw copies them, and from where it carries the results a returning
// frame left there into the next record's innermost frame, its caller.
//
// Saved frame pointers are not references. The frames that save one are
// the record's outermost ones: each links to its caller's slot, so the
// caller of a frame that saves one saves one too. In the image each slot
// but the outermost holds the word index of the next, from the first
// (Flags>>BPShift) to the outermost's (OuterBP). Thaw walks that chain and
// turns each index into the address of the slot it names. That costs a
// word per frame less than a reference. With OuterBP == NoBP there is no
// chain.
type RecordHeader struct {
	// Flags holds RecordDefers, RecordMoved and, from bit BPShift, the
	// word index of the first saved-BP slot of the chain.
	Flags uint32
	// Args is the outermost frame's argument words, the image's last.
	Args uint32
	// BP is the byte offset of the innermost frame's saved-BP slot.
	BP uint32
	// OuterBP is the word index of the outermost frame's saved BP, or NoBP.
	OuterBP uint32
	// PC is where the innermost frame continues.
	PC uintptr
	// Refs is the number of references into the record, in its tables.
	Refs uint32
	// Frames is the number of frames in the image.
	Frames uint32
	// Words is the image's length in words, arguments included.
	Words uint32
	// Ptrs is the number of pointers taken out of the image.
	Ptrs uint32
	// Len is the record's length in words, header included.
	Len uintptr
}

// RecordHeaderWords is the length of a RecordHeader in words.
const RecordHeaderWords = int(unsafe.Sizeof(RecordHeader{}) / unsafe.Sizeof(uintptr(0)))

// BPShift is where the first saved BP's word index sits in Flags, above
// the flags, which may use only the bits below it.
const BPShift = 2

// RecordDefers marks a record holding a frame with deferred calls pending.
const RecordDefers = 1

// RecordMoved marks a record that carries runtime defer records of its
// frames. Thaw calls RelinkDefers before it copies such a record.
const RecordMoved = 2

// NoBP marks a record whose outermost frame saves no frame pointer.
const NoBP = 0xFFFFFFFF

// MaxRecordArgs is the size of Thaw's argument area: a record's outermost
// frame may have at most this many bytes of arguments and results.
const MaxRecordArgs = 256

// HeaderOf returns the header of rec, a whole record.
func HeaderOf(rec []uintptr) *RecordHeader {
	return (*RecordHeader)(unsafe.Pointer(&rec[len(rec)-RecordHeaderWords]))
}

// HeaderEnding returns the header of the record that ends at end, the
// address just past it.
func HeaderEnding(end unsafe.Pointer) *RecordHeader {
	return (*RecordHeader)(unsafe.Add(end, -int(unsafe.Sizeof(RecordHeader{}))))
}
