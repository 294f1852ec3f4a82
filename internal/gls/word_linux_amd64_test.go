//go:build linux && amd64 && !race && go1.25 && !go1.28

package gls

import (
	"bytes"
	"runtime"
	"runtime/trace"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rtdwarf"
)

// The word this build keeps records in must be runtime.g.racectx, an
// 8-byte integer, as the runtime's own DWARF type information says.
func TestWordOffset(t *testing.T) {
	g := rtdwarf.Struct(t, rtdwarf.Runtime(t), "runtime.g")
	fl := rtdwarf.Field(t, g, "racectx")
	if fl.ByteOffset != wordOffset || fl.Type.Size() != 8 {
		t.Fatalf("runtime.g.racectx is %d bytes at offset %d; gls uses 8 bytes at %d", fl.Type.Size(), fl.ByteOffset, wordOffset)
	}
}

// This build must keep records in the word: a silent fall back to the
// table would go unnoticed but for the time it costs.
func TestWordInUse(t *testing.T) {
	if !wordOK {
		t.Fatal("records are kept in the table, not in the goroutines' words: the word was not zero at start-up")
	}
	l := &Local{}
	g := Bind(l)
	defer Unbind(g)
	if *word() != uintptr(unsafe.Pointer(l)) || tableOf(g) != nil {
		t.Fatal("Bind did not store the record in the goroutine's word alone")
	}
}

// Current, in assembly, reads the word, and the table where records are
// not kept in words (wordOK false: its jump to tableCurrent); CurrentG,
// its Go twin, reads the same.
func TestCurrentWordAndTable(t *testing.T) {
	Current := func() *Local {
		t.Helper()
		l := Current()
		if lg := CurrentG(arch.GPointer()); lg != l {
			t.Fatalf("Current() = %p, CurrentG(arch.GPointer()) = %p (wordOK %v)", l, lg, wordOK)
		}
		return l
	}
	if Current() != nil {
		t.Fatal("Current() on a goroutine with no record is not nil")
	}
	l := &Local{}
	g := Bind(l)
	if Current() != l {
		t.Fatal("Current() after Bind is not the record in the word")
	}
	Unbind(g)
	if Current() != nil {
		t.Fatal("Current() after Unbind is not nil")
	}
	// The table's path, as a runtime that used the word would take it.
	// Nothing else in this test binary binds records meanwhile.
	wordOK = false
	defer func() { wordOK = true }()
	if Current() != nil {
		t.Fatal("Current() on the table, with no record, is not nil")
	}
	g = Bind(l)
	if *word() != 0 {
		t.Fatal("Bind with wordOK false stored the record in the word")
	}
	if Current() != l {
		t.Fatal("Current() on the table is not the record bound there")
	}
	Unbind(g)
	if Current() != nil {
		t.Fatal("Current() on the table after Unbind is not nil")
	}
}

// Push swaps the record in the word, and in the table where records are
// not kept in words; Pop puts the one before back. SlotG finds the slot
// Push uses.
func TestPushPopWordAndTable(t *testing.T) {
	check := func(where string) {
		outer, inner := &Local{}, &Local{}
		s1, prev := Push(outer)
		if prev != nil || Current() != outer {
			t.Fatalf("%s: Push(outer) replaced %p (want nil), Current() = %p (want outer)", where, prev, Current())
		}
		s2, prev := Push(inner)
		if prev != outer || Current() != inner {
			t.Fatalf("%s: Push(inner) replaced %p (want outer), Current() = %p (want inner)", where, prev, Current())
		}
		if sg := SlotG(arch.GPointer()); sg != s2 || sg != s1 {
			t.Fatalf("%s: SlotG gives %v, Push gave %v and %v", where, sg, s1, s2)
		}
		if wordOK != (s2.w != nil) || wordOK != (s2.c == nil) {
			t.Fatalf("%s: the slot's word is %p and cell %p with wordOK %v", where, s2.w, s2.c, wordOK)
		}
		s2.Pop(prev)
		if Current() != outer {
			t.Fatalf("%s: Current() after the inner Pop is not outer", where)
		}
		s1.Pop(nil)
		if Current() != nil {
			t.Fatalf("%s: Current() after the outer Pop is not nil", where)
		}
	}
	check("word")
	if *word() != 0 {
		t.Fatal("the word is not zero after the pops")
	}
	wordOK = false
	defer func() { wordOK = true }()
	check("table")
	if *word() != 0 {
		t.Fatal("Push with wordOK false stored a record in the word")
	}
	Unbind(arch.G()) // the place tableSlot kept
}

// The runtime leaves the word zero on goroutines that never bound a
// record, the ones it reuses the descriptors of included.
func TestWordZeroOnFreshGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	nonzero := make(chan uintptr, 1000)
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w := *word(); w != 0 {
				nonzero <- w
			}
		}()
	}
	wg.Wait()
	close(nonzero)
	for w := range nonzero {
		t.Fatalf("a fresh goroutine's word holds %#x", w)
	}
}

// The runtime leaves a record in the word through what a goroutine goes
// through: preemption, collections, its stack growing and shrinking,
// blocking on channels and timers, cleanups, finalizers, execution
// tracing. A runtime release that started using the word would break it.
func TestWordUntouched(t *testing.T) {
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	stop := make(chan struct{})
	ticks := time.NewTicker(50 * time.Microsecond)
	defer ticks.Stop()
	var traceBuf bytes.Buffer
	if err := trace.Start(&traceBuf); err == nil {
		defer trace.Stop()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &Local{}
			g := Bind(l)
			defer Unbind(g)
			check := func(what string) bool {
				if *word() != uintptr(unsafe.Pointer(l)) {
					errs <- "the word changed across " + what
					return false
				}
				return true
			}
			for i := 0; i < 200; i++ {
				spin := 0
				for j := 0; j < 20000; j++ { // long enough to be preempted
					spin += j ^ i
				}
				_ = spin
				if !check("a busy loop") {
					return
				}
				deep(64 + i%64) // grows the stack
				if !check("stack growth") {
					return
				}
				if i%20 == 0 {
					runtime.GC() // may shrink the stack
					if !check("a collection") {
						return
					}
				}
				x := new([64]byte)
				runtime.AddCleanup(x, func(int) {}, 0)
				runtime.SetFinalizer(new([32]byte), func(*[32]byte) {})
				select {
				case <-ticks.C:
				case <-time.After(10 * time.Microsecond):
				case <-stop:
				}
				if !check("blocking on a timer") {
					return
				}
				runtime.Gosched()
				if !check("a yield to the scheduler") {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

//go:noinline
func deep(n int) int {
	var pad [16]uintptr
	pad[n%16] = uintptr(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%16])
}
