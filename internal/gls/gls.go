// Package gls maps a goroutine to the continuation whose body it is running.
//
// It is the one piece of per-goroutine state weft keeps. Both the engine
// (package weft) and package pinning need it, and neither may import the
// other's internals, so it lives here.
//
// The portable backend binds a body goroutine when it starts and unbinds it
// before it ends. The stack-copying backend binds the goroutine that calls
// Run for as long as the continuation is mounted and then restores what was
// there before.
//
// Where it can (linux/amd64 builds of Go 1.25 to 1.27 without -race), a
// goroutine's record is kept in a word of the goroutine's own runtime.g
// that such builds leave unused (word_linux_amd64.go says which, and the
// rules its writers keep): finding it is a load from the g, where the
// engine and the scheduler ask for it several times on every switch.
// Elsewhere, and if the word is not zero at start-up, records are kept in
// a lock-free table keyed by goroutine. On the table, a goroutine the
// stack-copying backend mounts continuations on keeps its place, holding
// no record, so that the next Run on it costs two atomic stores; the
// runtime reuses the descriptors of goroutines that have ended, so the
// places kept number at most the goroutines that ever ran continuations
// at once, and they hold nothing a user must reset.
package gls

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// Local is the goroutine-local record of one continuation. The engine
// embeds it as the first field of its continuation record and recovers the
// record from a Local's address, so a Local holds no pointer back to it.
type Local struct {
	// pins counts the pinning.Do critical sections open in this
	// continuation's own frames; pinPC is the call site of the outermost.
	pins atomic.Int32
	// Locks is the calling thread's count of runtime.LockOSThread calls
	// when the continuation was last mounted (stack-copying backend).
	Locks uint32
	pinPC uintptr
}

// EnterCritical records entry to a pinning.Do critical section whose call
// site is pc (0 if unknown).
func (l *Local) EnterCritical(pc uintptr) {
	if l.pins.Add(1) == 1 {
		l.pinPC = pc
	}
}

// ExitCritical records the end of a critical section.
func (l *Local) ExitCritical() {
	if l.pins.Add(-1) == 0 {
		l.pinPC = 0
	}
}

// Pinned reports whether a critical section is open in this continuation's
// frames, and the call site of the outermost one.
func (l *Local) Pinned() (bool, uintptr) {
	if l.pins.Load() == 0 {
		return false, 0
	}
	return true, l.pinPC
}

// PinCount returns how many critical sections are open in this
// continuation's frames: Pinned's test, for a caller that needs no site.
func (l *Local) PinCount() int32 { return l.pins.Load() }

// PinFrame resolves a critical-section call site to a frame.
func PinFrame(pc uintptr) runtime.Frame {
	if pc == 0 {
		return runtime.Frame{}
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return f
}

// OwnerFrame resolves pc, a return address in a frame live on the calling
// goroutine's stack, to the function that owns that frame: the outermost
// of the functions inlined there, at the line where it made the call, where
// PinFrame gives the innermost. A defer record belongs to the owner: a
// function with a defer statement is never inlined into another.
// runtime.CallersFrames of pc alone names only the innermost function, so
// OwnerFrame finds pc in runtime.Callers, which lists a PC for each
// function inlined there, and takes the last of them.
func OwnerFrame(pc uintptr) runtime.Frame {
	if pc == 0 {
		return runtime.Frame{}
	}
	f := runtime.FuncForPC(pc - 1)
	if f == nil {
		return PinFrame(pc)
	}
	entry := f.Entry()
	pcs := make([]uintptr, 128)
	n := runtime.Callers(1, pcs)
	for n == len(pcs) {
		pcs = make([]uintptr, 2*len(pcs))
		n = runtime.Callers(1, pcs)
	}
	pcs = pcs[:n]
	for i, p := range pcs {
		if p != pc {
			continue
		}
		last := i
		for last+1 < n {
			g := runtime.FuncForPC(pcs[last+1] - 1)
			if g == nil || g.Entry() != entry {
				break
			}
			last++
		}
		fr, _ := runtime.CallersFrames(pcs[last : last+1]).Next()
		return fr
	}
	// Not on this stack: the owner's name, at its first line.
	owner := runtime.FuncForPC(entry)
	file, line := owner.FileLine(entry)
	return runtime.Frame{PC: pc, Function: owner.Name(), File: file, Line: line, Entry: entry}
}

// The table maps a goroutine (its g pointer, from arch.G) to a cell that
// holds its current record. It is an open-addressing hash table of
// immutable layout: lookups are lock free (atomic loads only) and allocate
// nothing; adding or removing a goroutine takes a mutex and may publish a
// rebuilt table. A goroutine's cell is never replaced while it is in the
// table, so setting its record is one atomic store, and a rebuild cannot
// lose it.
type cell struct {
	g uintptr
	l atomic.Pointer[Local]
}

type table struct {
	mask  uintptr
	slots []atomic.Pointer[cell]
}

var (
	tab  atomic.Pointer[table]
	mu   sync.Mutex // serialises inserts, removals and rebuilds
	used int        // slots holding a cell or a tombstone
	live int        // slots holding a cell
)

// tombstone marks a removed cell, so that probes for other goroutines go on
// past it.
var tombstone = &cell{}

func hash(g uintptr) uintptr { return uintptr(uint64(g) * 0x9E3779B97F4A7C15 >> 20) }

// lookup returns g's cell, or nil.
func lookup(g uintptr) *cell {
	t := tab.Load()
	if t == nil {
		return nil
	}
	for i := hash(g) & t.mask; ; i = (i + 1) & t.mask {
		c := t.slots[i].Load()
		if c == nil {
			return nil
		}
		if c.g == g && c != tombstone {
			return c
		}
	}
}

// insert returns g's cell, adding one if there is none.
func insert(g uintptr) *cell {
	mu.Lock()
	defer mu.Unlock()
	if c := lookup(g); c != nil {
		return c
	}
	t := tab.Load()
	if t == nil || 4*(used+1) > 3*len(t.slots) {
		t = rebuild(t, live+1)
	}
	c := &cell{g: g}
	for i := hash(g) & t.mask; ; i = (i + 1) & t.mask {
		old := t.slots[i].Load()
		if old == nil || old == tombstone {
			if old == nil {
				used++
			}
			t.slots[i].Store(c)
			live++
			return c
		}
	}
}

// rebuild publishes a table with room for n cells, holding t's live cells
// and no tombstones. Called with mu held.
func rebuild(t *table, n int) *table {
	size := 64
	for 2*n > size {
		size *= 2
	}
	nt := &table{mask: uintptr(size - 1), slots: make([]atomic.Pointer[cell], size)}
	used = 0
	if t != nil {
		for i := range t.slots {
			c := t.slots[i].Load()
			if c == nil || c == tombstone {
				continue
			}
			for j := hash(c.g) & nt.mask; ; j = (j + 1) & nt.mask {
				if nt.slots[j].Load() == nil {
					nt.slots[j].Store(c)
					used++
					break
				}
			}
		}
	}
	tab.Store(nt)
	return nt
}

// tableBind, tableRestore, tableUnbind and tableOf are Bind, Restore,
// Unbind and Of on the table; tableSlot is SlotG's goroutine's place.

func tableBind(l *Local) uintptr {
	g := arch.G()
	c := lookup(g)
	if c == nil {
		c = insert(g)
	}
	c.l.Store(l)
	return g
}

func tableRestore(g uintptr, l *Local) {
	if c := lookup(g); c != nil {
		c.l.Store(l)
	}
}

func tableUnbind(g uintptr) {
	mu.Lock()
	defer mu.Unlock()
	t := tab.Load()
	if t == nil {
		return
	}
	for i := hash(g) & t.mask; ; i = (i + 1) & t.mask {
		c := t.slots[i].Load()
		if c == nil {
			return
		}
		if c.g == g && c != tombstone {
			c.l.Store(nil)
			t.slots[i].Store(tombstone)
			live--
			if live == 0 {
				// Nothing is bound: drop the table, and with it the tombstones.
				tab.Store(nil)
				used = 0
			}
			return
		}
	}
}

func tableOf(g uintptr) *Local {
	if c := lookup(g); c != nil {
		return c.l.Load()
	}
	return nil
}

func tableSlot() Slot {
	g := arch.G()
	c := lookup(g)
	if c == nil {
		c = insert(g)
	}
	return Slot{c: c}
}

// loadWord reads the record in word w.
func loadWord(w *uintptr) *Local { return *(**Local)(unsafe.Pointer(w)) }

// storeWord sets the record in word w, which only its goroutine writes:
// a plain store, unseen by the collector (word_linux_amd64.go says why
// that is safe).
func storeWord(w *uintptr, l *Local) { *w = uintptr(unsafe.Pointer(l)) }

// Bind records l as the calling goroutine's record, replacing any, and
// returns the goroutine's key for Restore, Unbind and Of. The goroutine
// must call Unbind or Restore(g, nil) before it ends, and must keep l's
// owner reachable while it is bound.
func Bind(l *Local) uintptr {
	if wordOK {
		storeWord(word(), l)
		return arch.G()
	}
	return tableBind(l)
}

// Restore sets goroutine g's record back to l, which may be nil, keeping
// its place in the table: for an engine that binds and unbinds the same
// goroutine over and over. g must be the calling goroutine.
func Restore(g uintptr, l *Local) {
	if wordOK {
		storeWord(word(), l)
		return
	}
	tableRestore(g, l)
}

// Unbind removes goroutine g's record, and its place in the table: for a
// goroutine that is about to end. g must be the calling goroutine.
func Unbind(g uintptr) {
	if wordOK {
		storeWord(word(), nil)
		return
	}
	tableUnbind(g)
}

// CurrentG is Current (word_linux_amd64.go, word_none.go) for g, the
// calling goroutine's runtime.g
// (arch.GPointer). With records in the goroutines' words it is one load.
// g is nil where the runtime's g is not mirrored (rt.CurG), and then
// records are in the table.
func CurrentG(g unsafe.Pointer) *Local {
	if wordOK {
		return loadWord((*uintptr)(unsafe.Add(g, wordOffset)))
	}
	return tableCurrent()
}

// Push makes l the calling goroutine's record and returns its slot and
// the record it replaced, which Pop puts back. A goroutine that pushed
// must pop before it ends, and keep l's owner reachable meanwhile.
func Push(l *Local) (s Slot, prev *Local) {
	if wordOK {
		s = Slot{w: word()}
	} else {
		s = tableSlot()
	}
	return s, s.Push(l)
}

// SlotG returns the slot of g, the calling goroutine's runtime.g, as
// CurrentG: for Slot.Push, which is Push in two steps.
func SlotG(g unsafe.Pointer) Slot {
	if wordOK {
		return Slot{w: (*uintptr)(unsafe.Add(g, wordOffset))}
	}
	return tableSlot()
}

// tableCurrent is Current on the table, with lookup inlined: one call (to
// find the goroutine) in all. It is kept out of Current, which stays
// short for the word (and on linux/amd64 jumps here when records are
// not kept in words).
//
//go:noinline
func tableCurrent() *Local {
	if c := lookup(arch.G()); c != nil {
		return c.l.Load()
	}
	return nil
}

// Of returns the record of goroutine g (an arch.G value), or nil. g must
// be a live goroutine whose record does not change meanwhile: the portable
// backend asks it of the goroutine that called Run, which waits for the
// body goroutine until it switches back.
func Of(g uintptr) *Local {
	if wordOK {
		return loadWord(wordOfG(g))
	}
	return tableOf(g)
}

// Slot is a goroutine's place, for an engine that swaps the goroutine's
// record in and out many times while it runs: Push and Pop cost one
// lookup for the pair.
type Slot struct {
	w *uintptr // the goroutine's word, if records are kept there
	c *cell    // its cell in the table, otherwise
}

// Pop puts back the record that Push replaced. It must be called on the
// goroutine that called Push. (The table's store is out of line, so that
// Pop inlines.)
func (s Slot) Pop(prev *Local) {
	if s.w != nil {
		storeWord(s.w, prev)
		return
	}
	s.popTable(prev)
}

// Push makes l the record of the slot's goroutine, the calling one, and
// returns the record it replaced, which Pop puts back: the second step of
// Push, after SlotG. The rules of Push hold.
func (s Slot) Push(l *Local) (prev *Local) {
	if s.w == nil {
		return pushTable(s.c, l)
	}
	// loadWord and storeWord, written out to keep Push inlined.
	prev = *(**Local)(unsafe.Pointer(s.w))
	*s.w = uintptr(unsafe.Pointer(l))
	return prev
}

// pushTable is Push for a slot in the table, cell c.
//
//go:noinline
func pushTable(c *cell, l *Local) *Local { return c.l.Swap(l) }

// popTable is Pop for a slot in the table.
//
//go:noinline
func (s Slot) popTable(prev *Local) { s.c.l.Store(prev) }
