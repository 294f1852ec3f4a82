//go:build amd64 && !race && !msan && !asan

package weft

import (
	"sync/atomic"
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// The capture templates, for capture's fast path (fastCapture,
// freeze_amd64.go). A yield in a loop freezes the same frames, at the
// same call sites, every time: the frames a resume thawed above the
// return barrier. All the general capture (captureIn) learns from such a
// region, but for its values, depends only on the chain of PCs. So a
// successful capture of a simple region records it as a template. The
// template holds the frame sizes, the words the stack maps mark live, the
// saved-frame-pointer links, where deferred-call bits are, and the record
// header. The next capture of the same chain above the same barrier copies
// the region straight into the chunk, and the tables from the template.
//
// A region qualifies if it lies above a return barrier, or is a body's
// frames from its start above arch.Enter (a fresh region, the first
// capture of a chunk) made into one record, with no stack objects and no
// references into the stack but saved frame pointers. A region above the
// barrier may be cut into several records (the thaw policy,
// capture_amd64.go): the cuts depend only on the frames' descriptors, so
// the template holds each record's part. A fresh region's template serves
// the first capture of every continuation that runs the same chain. No
// defer record may point into it. The fast path checks the parts that
// depend on values: a live word pointing into the stack, a defer record.
// It leaves anything unusual to the general path. It commits nothing
// until the end, so the general path finds the chunk undisturbed.

// maxTemplateFrames bounds the frames of a template: templateAt walks as
// far before it gives up, and a deeper region takes the general capture.
// 256 frames take a recursion 200 deep (Loom's "pattern B" at depth 200).
const maxTemplateFrames = 256

// captureTemplate is what a region's chain of PCs determines. It is
// immutable once published.
type captureTemplate struct {
	selfPC   uintptr // capture's own PC, where the walk starts
	selfSize uint32
	skipPC   uintptr // the PC of the frame capture left out, 0 if none
	skipSize uint32
	nf       int
	hash     uint64    // chainHash of pcs: it picks the template's set
	pcs      []uintptr // the chain, innermost first: nf frames
	sizes    []uint32  // their frame sizes
	stopPC   uintptr   // the return address into arch.Thaw above the region
	stopSize uint32    // arch.Thaw's frame size
	// fresh: the region lies above arch.Enter, not the barrier. It is a
	// body's frames from its start: the first capture of a chunk, made
	// into an empty chunk. stopPC and stopSize are then arch.Enter's.
	fresh bool
	words int // the region's words, the outermost frame's arguments included
	// recs are the records the region is cut into, outermost first: the
	// order in which they lie in the chunk.
	recs []templateRecord
	// size and ptrs are the chunk words and pointer slots of all records.
	size, ptrs int
}

// templateRecord is one record of a template.
type templateRecord struct {
	// rb is the region word the record's image starts at, and nw its
	// image's words, the outermost frame's arguments included. Records'
	// images overlap by those arguments.
	rb, nw uint32
	// links are the saved-frame-pointer slots of the record's frames but
	// the outermost's, innermost first. Each is a slot's word index and
	// the word index of the next slot, both in the image. The slot holds
	// the next one on the stack as an address, and in the record as that
	// index.
	links []bpLink
	// ptrWords are the image words of the live words the stack maps mark
	// that are the record's, in the order of its pointer table.
	ptrWords []uint32
	// overlap are the image words that hold the live arguments of the
	// next inner record's outermost frame, that record's, and, but in
	// the region's outermost record, the outermost frame's saved frame
	// pointer, which Thaw stores: the image holds them as zero, as the
	// general capture's does.
	overlap []uint32
	// tail is what the record holds after the image: its tables (the
	// pointer word indexes, every live word, nil or not, two to a word;
	// the references, none) and its header, flags clear.
	tail []uintptr
	// deferAt are the image byte offsets of frames' open-coded defer bits.
	deferAt []uint32
}

// bpLink is a saved-frame-pointer slot of a template's region.
type bpLink struct{ at, next uint32 }

// templateCacheBits sizes the template cache: 256 sets of two.
const templateCacheBits = 8

// templateCache holds templates by a hash of their chain of PCs. Like
// descCache it holds only facts about the binary's code. Each set holds
// two, the newer first. So two chains whose hashes collide (a loop that
// parks in a read, then in a write) do not evict each other.
var templateCache [1 << templateCacheBits]templateSet

// templateSet is a set of the template cache.
type templateSet [2]atomic.Pointer[captureTemplate]

// frozenBytes returns the bytes of stack a capture with t freezes: its
// region less the outermost frame's arguments.
func (t *captureTemplate) frozenBytes() uintptr {
	return (uintptr(t.words) - uintptr(arch.HeaderOf(t.recs[0].tail).Args)) * wordSize
}

// chainHash folds pc, a chain's next frame outward, into h, the hash of
// the frames before it (0 for none). templateAt hashes a chain as it
// walks it, and templateFor from a capture's frames.
func chainHash(h uint64, pc uintptr) uint64 {
	return (h ^ uint64(pc)) * 0x9E3779B97F4A7C15
}

// templateSetOf returns the set of the cache for chains whose hash is h.
func templateSetOf(h uint64) *templateSet {
	return &templateCache[h>>(64-templateCacheBits)]
}

// find returns the set's template of a chain of nf frames whose hash is
// h, from capture's own PC selfPC, leaving out skipPC's frame (0: none),
// up to the barrier at stopPC; nil if it holds none. It does not compare
// the chain itself: fastCapture does, frame by frame, before it uses the
// template, and templateFor before it shares it. (Two chains with one
// hash and these PCs are as likely as a 64-bit collision; the second
// then takes the general path.)
func (s *templateSet) find(h uint64, nf int, selfPC, skipPC, stopPC uintptr) *captureTemplate {
	for i := range s {
		if t := s[i].Load(); t != nil && t.hash == h && t.nf == nf && t.selfPC == selfPC && t.skipPC == skipPC && t.stopPC == stopPC {
			return t
		}
	}
	return nil
}

// publish makes t the set's newer template, the newer one before it the
// older. Two publishers at once may lose one of theirs: a template is
// only ever a shortcut, and each one stored is complete and immutable.
func (s *templateSet) publish(t *captureTemplate) {
	s[1].Store(s[0].Load())
	s[0].Store(t)
	if t.fresh {
		return
	}
	for {
		m := barrierTemplateFrames.Load()
		if int32(t.nf) <= m || barrierTemplateFrames.CompareAndSwap(m, int32(t.nf)) {
			return
		}
	}
}

// barrierTemplateFrames is the most frames of any template published for
// a region above the barrier: templateAt stops looking past this many
// frames, as no longer chain has a template.
var barrierTemplateFrames atomic.Int32

// templateAt finds the published template of the chain of frames from
// capture's caller up to the return barrier, or up to arch.Enter for a
// fresh region; nil if there is none, or if the chain has more than limit
// frames. With skip the chain starts at the caller's caller. pc and sp
// are capture's own. It walks the chain with the frame descriptors,
// hashing it as it goes: it keeps no copy, and fastCapture compares the
// chain with the template's. A yield loop that
// alternates between call chains (a send then a receive) finds each
// chain's template here, when the chunk's own, the last chain's, does not
// match.
//
// Descriptors come from descFor, whose lookups may move the stack: sp is
// an unsafe.Pointer, which moves with it, and only offsets from it are
// read.
func templateAt(pc uintptr, sp unsafe.Pointer, skip bool, limit int) *captureTemplate {
	selfPC, skipPC := pc, uintptr(0)
	d := descFor(pc)
	if d.bad {
		return nil
	}
	pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
	sp = unsafe.Add(sp, d.size)
	if skip {
		d := descFor(pc)
		if d.bad {
			return nil
		}
		skipPC = pc
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	var h uint64
	nf := 0
	for {
		d := descFor(pc)
		if hooks.templateAt != nil {
			hooks.templateAt() // tests: move the stack mid-walk
		}
		if (d.entry == thawPC || d.entry == enterPC) && !d.bad {
			break
		}
		if d.stop || nf == limit {
			return nil
		}
		h = chainHash(h, pc)
		nf++
		pc = *(*uintptr)(unsafe.Add(sp, d.size-8))
		sp = unsafe.Add(sp, d.size)
	}
	return templateSetOf(h).find(h, nf, selfPC, skipPC, pc)
}

// sameChain reports whether t's chain is that of the frames s captured.
func (s *captureScratch) sameChain(t *captureTemplate) bool {
	for i := range s.frames {
		if t.pcs[i] != s.frames[i].pc {
			return false
		}
	}
	return true
}

// templateFor returns the template of the region s has just captured, or
// nil if the region does not qualify (it has a frame at least:
// fastCapture relies on it). It shares a published template of the same
// chain, and publishes a new one otherwise.
func (s *captureScratch) templateFor() *captureTemplate {
	nf := len(s.frames)
	if nf == 0 || s.objects || len(s.defs) != 0 || len(s.refs)+len(s.weak)+len(s.cleared) != 0 || nf > maxTemplateFrames {
		return nil
	}
	if len(s.cuts) != 1 && !s.barrier {
		return nil // a large fresh region: a body's first capture only
	}
	// fastCapture chains the saved frame pointers of every frame but the
	// outermost, which must save one too: the chain ends at its slot.
	// (copyRegion has checked that much; thaw would leave word indexes in
	// frames whose chain had no end.)
	for i := range nf - 1 {
		if !s.frames[i].d.hasBP {
			return nil
		}
	}
	if nf > 1 && (s.outerBP < 0 || uint32(s.outerBP) != s.frames[nf-1].fp/uint32(wordSize)-2) {
		return nil
	}
	var h uint64
	for i := range s.frames {
		h = chainHash(h, s.frames[i].pc)
	}
	set := templateSetOf(h)
	if t := set.find(h, nf, s.selfPC, s.skipPC, s.stopPC); t != nil && s.sameChain(t) {
		return t
	}
	t := &captureTemplate{selfPC: s.selfPC, selfSize: s.selfSize, skipPC: s.skipPC, skipSize: s.skipSize, nf: nf, hash: h, stopPC: s.stopPC, stopSize: s.stopSize, fresh: !s.barrier, words: len(s.words)}
	t.pcs, t.sizes = make([]uintptr, nf), make([]uint32, nf)
	for i := range s.frames {
		t.pcs[i], t.sizes[i] = s.frames[i].pc, s.frames[i].d.size
	}
	// The live words, innermost frame first, each once, and whose record
	// each is: a word in the argument area of a record's outermost frame
	// is that frame's, as push has it.
	nrec := len(s.cuts)
	var live []uint32
	var owner []int
	seen := make(map[uint32]bool)
	for i := range s.frames {
		f := &s.frames[i]
		for _, off := range f.d.ptrOffs {
			w := (f.sp + off) / uint32(wordSize)
			if seen[w] {
				continue
			}
			seen[w] = true
			r := 0
			if nrec > 1 {
				a, _ := s.owners(w)
				r = int(s.recordOfFrame(a))
			}
			live = append(live, w)
			owner = append(owner, r)
		}
	}
	t.recs = make([]templateRecord, nrec)
	for r := range nrec {
		fs, fe := s.recordFrames(r)
		rb := s.frames[fs].sp / uint32(wordSize)
		nw := (s.frames[fe-1].fp - s.frames[fs].sp + s.argsOf(fe-1)) / uint32(wordSize)
		tr := &t.recs[nrec-1-r] // outermost first
		tr.rb, tr.nw = rb, nw
		for i := fs; i < fe-1; i++ {
			at := s.frames[i].fp/uint32(wordSize) - 2 - rb
			next := s.frames[i+1].fp/uint32(wordSize) - 2 - rb
			tr.links = append(tr.links, bpLink{at: at, next: next})
		}
		for i, w := range live {
			switch {
			case owner[i] == r:
				tr.ptrWords = append(tr.ptrWords, w-rb)
			case w >= rb && w < rb+nw:
				tr.overlap = append(tr.overlap, w-rb)
			}
		}
		for i := fs; i < fe; i++ {
			if f := &s.frames[i]; f.d.deferAt >= 0 {
				tr.deferAt = append(tr.deferAt, f.sp+uint32(f.d.deferAt)-rb*uint32(wordSize))
			}
		}
		np := len(tr.ptrWords)
		tr.tail = make([]uintptr, (np+1)/2+arch.RecordHeaderWords)
		tab := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(tr.tail))), np)
		copy(tab, tr.ptrWords)
		outerBP := uint32(arch.NoBP)
		if fe < nf || s.outerBP >= 0 {
			outerBP = s.frames[fe-1].fp/uint32(wordSize) - 2 - rb
		}
		if fe < nf {
			tr.overlap = append(tr.overlap, outerBP)
		}
		bpFirst := uint32(0)
		if outerBP != arch.NoBP {
			bpFirst = s.frames[fs].fp/uint32(wordSize) - 2 - rb
		}
		*arch.HeaderOf(tr.tail) = arch.RecordHeader{
			Flags:   recordFlags(false, bpFirst),
			Args:    s.argsOf(fe-1) / uint32(wordSize),
			BP:      s.frames[fs].fp - 2*uint32(wordSize) - rb*uint32(wordSize),
			OuterBP: outerBP,
			PC:      s.frames[fs].pc,
			Frames:  uint32(fe - fs), // no references
			Words:   nw,
			Ptrs:    uint32(np),
			Len:     uintptr(int(nw) + len(tr.tail)),
		}
		t.size += int(nw) + len(tr.tail)
		t.ptrs += np
	}
	set.publish(t)
	return t
}
