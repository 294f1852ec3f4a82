//go:build amd64 && !race && !msan && !asan

package weft

import (
	"fmt"
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// flatChunk is a chunk's records put back together as the one region they
// were captured from, innermost frame at offset 0: what the capture tests
// compare with the live stack.
type flatChunk struct {
	words   []uintptr
	ptrAt   []uint32
	ptrs    []unsafe.Pointer
	refs    []stackRef
	outerBP int32 // word index of the outermost frame's saved BP, or -1
	frames  []chunkFrame
}

// flat rebuilds c's records as one region. The saved frame pointer of each
// record's outermost frame, which thaw links to the barrier, becomes a
// reference to the next record's innermost frame.
func (c *stackChunk) flat() flatChunk {
	f := flatChunk{outerBP: -1}
	recs := c.records()
	ptop := int(c.PtrTop)
	base := uint32(0) // words
	for i, r := range recs {
		img := c.words(r)
		args := r.Args
		frameWords := r.Words - args
		if i == len(recs)-1 {
			frameWords = r.Words
		}
		if len(f.words) < int(base+r.Words) {
			f.words = append(f.words, make([]uintptr, int(base+r.Words)-len(f.words))...)
		}
		for w := range frameWords {
			f.words[base+w] = img[w]
		}
		ps := c.pointers()[ptop-int(r.Ptrs) : ptop]
		ptop -= int(r.Ptrs)
		for k, w := range c.ptrAt(r) {
			f.ptrAt = append(f.ptrAt, base+w)
			f.ptrs = append(f.ptrs, ps[k])
		}
		for _, x := range c.refs(r) {
			f.refs = append(f.refs, stackRef{at: base + x.at, target: base*uint32(wordSize) + x.target})
		}
		// The saved-BP chain, as the references it stands for, its slots
		// zero as in the region copyRegion left.
		if r.OuterBP != arch.NoBP {
			for at, steps := r.bpFirst(), uint32(0); at != r.OuterBP; steps++ {
				if steps == r.Frames || at >= r.Words {
					panic(fmt.Sprintf("weft: record's saved-BP chain is broken at word %d (first %d, outermost %d, %d frames)", at, r.bpFirst(), r.OuterBP, r.Frames))
				}
				next := uint32(img[at])
				f.refs = append(f.refs, stackRef{at: base + at, target: (base + next) * uint32(wordSize)})
				f.words[base+at] = 0
				at = next
			}
		}
		pc, sp := r.PC, base*uint32(wordSize)
		for j := range r.Frames {
			d := descFor(pc)
			f.frames = append(f.frames, chunkFrame{pc: pc, sp: sp, fp: sp + d.size, d: d})
			sp += d.size
			if j+1 < r.Frames {
				pc = img[sp/uint32(wordSize)-base-1]
			}
		}
		next := base + frameWords
		if r.OuterBP != arch.NoBP {
			if i == len(recs)-1 {
				f.outerBP = int32(base + r.OuterBP)
			} else {
				nr := recs[i+1]
				f.refs = append(f.refs, stackRef{at: base + r.OuterBP, target: next*uint32(wordSize) + nr.BP})
			}
		}
		base = next
	}
	return f
}
