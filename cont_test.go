//go:build amd64 && !race && !msan && !asan

package weft

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/scope"
)

// Every continuation, and so every virtual thread, carries a Cont: it
// keeps to the 192-byte size class on the stack-copying backend, and to
// the 288-byte one with its counters (NewCont). A field added must pay for
// itself.
func TestContSize(t *testing.T) {
	if n := unsafe.Sizeof(Cont{}); n > 192 {
		t.Fatalf("Cont is %d bytes, over its 192-byte budget (a size class)", n)
	}
	if n := unsafe.Sizeof(countedCont{}); n > 288 {
		t.Fatalf("a Cont with counters is %d bytes, over its 288-byte budget (a size class)", n)
	}
}

// resetDeep recurses depth frames, each holding a heap pointer, and
// yields at the bottom; then it panics there if boom is set, with frames
// still frozen below the barrier and nothing deferred in them.
//
//go:noinline
func resetDeep(s *scope.Scope, depth int, boom bool) int {
	h := &capNode{v: depth}
	if depth == 0 {
		if _, perr := Yield(s); perr != nil {
			panic(perr)
		}
		if boom {
			panic("boom")
		}
		return h.v
	}
	return resetDeep(s, depth-1, boom) + h.v
}

// A record that has been Reset keeps its chunk's arrays when its body
// ends, with no pointer left in them, whether the
// body returned or panicked with frames still frozen; the next body after
// a Reset freezes into the same arrays.
func TestResetKeepsArrays(t *testing.T) {
	if !useStackCopy {
		t.Skip("the stack-copying backend is not active")
	}
	s := scope.New("reset-keeps")
	c := NewCont(s, func() {})
	c.Run(nil) // a record's first body keeps nothing: it is not yet reused
	if c.stack.chunk.Mem != nil {
		t.Fatal("a record that was never reset kept its arrays")
	}
	for round := range 6 {
		boom := round%2 == 1
		c.Reset(s, func() { resetDeep(s, 20, boom) })
		c.Run(nil) // to the yield
		mem, ptrs := c.stack.chunk.Mem, c.stack.chunk.Ptrs
		if round >= 1 && (mem != prevMem || ptrs != prevPtrs) {
			t.Fatalf("round %d: the body froze into new arrays, not the kept ones", round)
		}
		prevMem, prevPtrs = mem, ptrs
		func() {
			defer func() {
				if r := recover(); (r != nil) != boom {
					t.Fatalf("round %d: recovered %v", round, r)
				}
			}()
			c.Run(nil) // thaws the top frames only; the rest stay frozen
		}()
		if !c.IsDone() {
			t.Fatalf("round %d: the body did not end", round)
		}
		k := &c.stack.chunk
		if k.Mem != mem || k.Ptrs != ptrs {
			t.Fatalf("round %d: the ended record did not keep its arrays", round)
		}
		if k.MemTop != 0 || k.PtrTop != 0 || k.ptrHigh != 0 {
			t.Fatalf("round %d: the kept chunk is not empty: tops %d, %d, high %d", round, k.MemTop, k.PtrTop, k.ptrHigh)
		}
		for i, p := range k.pointers() {
			if p != nil {
				t.Fatalf("round %d: the kept pointers array still holds %p at %d", round, p, i)
			}
		}
		runtime.GC()
	}
}

// TestFinishedKeepsOnlyArrays checks that the end of a body that a Reset
// will follow (finished with keep) leaves nothing of the record's
// stack-copying state but the chunk's arrays, emptied of the pointers
// they held, and the body: finished clears the rest field by
// field, and a field added to stackState or stackChunk and not to finished
// fails here.
func TestFinishedKeepsOnlyArrays(t *testing.T) {
	var c stackState
	fillNonZero(t, reflect.ValueOf(&c).Elem(), "")
	mem := make([]uintptr, 8)
	ptrs := make([]unsafe.Pointer, 4)
	for i := range ptrs {
		ptrs[i] = unsafe.Pointer(new(int))
	}
	c.chunk.Mem, c.chunk.memLen = unsafe.Pointer(&mem[0]), uint32(len(mem))
	c.chunk.Ptrs, c.chunk.ptrsLen = unsafe.Pointer(&ptrs[0]), uint32(len(ptrs))
	c.chunk.PtrTop, c.chunk.ptrHigh = 2, 3
	body := c.body
	c.finished(true)
	keep := map[string]bool{".chunk.Link.Mem": true, ".chunk.memLen": true, ".chunk.Link.Ptrs": true, ".chunk.ptrsLen": true, ".body": true}
	if bad := nonZeroFields(reflect.ValueOf(&c).Elem(), "", keep); len(bad) > 0 {
		t.Errorf("finished(true) left %s set", strings.Join(bad, ", "))
	}
	if c.chunk.Mem != unsafe.Pointer(&mem[0]) || c.chunk.memLen != 8 || c.chunk.Ptrs != unsafe.Pointer(&ptrs[0]) || c.chunk.ptrsLen != 4 {
		t.Errorf("finished(true) dropped the arrays: %+v", c.chunk.Link)
	}
	if reflect.ValueOf(c.body).Pointer() != reflect.ValueOf(body).Pointer() {
		t.Error("finished(true) dropped the body, which a Reset to the same one would store again")
	}
	if ptrs[0] != nil || ptrs[1] != nil || ptrs[2] != nil {
		t.Errorf("finished(true) left pointers below max(PtrTop, ptrHigh): %v", ptrs[:3])
	}
	// Without keep, or with arrays too large to keep, nothing is left.
	for _, keep := range []bool{false, true} {
		var d stackState
		fillNonZero(t, reflect.ValueOf(&d).Elem(), "")
		if keep {
			d.chunk.Mem, d.chunk.memLen = unsafe.Pointer(&mem[0]), maxKeptArrays // words: over the bytes kept
			d.chunk.Ptrs, d.chunk.ptrsLen = unsafe.Pointer(&ptrs[0]), uint32(len(ptrs))
		}
		d.finished(keep)
		if bad := nonZeroFields(reflect.ValueOf(&d).Elem(), "", nil); len(bad) > 0 {
			t.Errorf("finished(%v) with arrays it does not keep left %s set", keep, strings.Join(bad, ", "))
		}
	}
}
