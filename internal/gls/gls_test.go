package gls

import (
	"runtime"
	"sync"
	"testing"

	"github.com/weftrt/weft/arch"
)

func TestBindIsPerGoroutine(t *testing.T) {
	if Current() != nil {
		t.Fatal("a plain goroutine has a record")
	}
	l := &Local{}
	g := Bind(l)
	if Current() != l || Of(g) != l {
		t.Fatal("Bind did not record the goroutine's record")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if Current() != nil {
			t.Error("another goroutine sees this goroutine's record")
		}
		other := &Local{}
		og := Bind(other)
		if Current() != other || og == g {
			t.Error("second goroutine's binding is wrong")
		}
		Unbind(og)
	}()
	wg.Wait()
	if Current() != l {
		t.Fatal("the other goroutine's Unbind removed this goroutine's record")
	}
	Unbind(g)
	if Current() != nil || Of(g) != nil {
		t.Fatal("Unbind left the record")
	}
}

func TestCriticalSections(t *testing.T) {
	var l Local
	if pinned, _ := l.Pinned(); pinned {
		t.Fatal("a new record is pinned")
	}
	l.EnterCritical(100)
	l.EnterCritical(200) // nested: the outermost call site is kept
	if pinned, pc := l.Pinned(); !pinned || pc != 100 {
		t.Fatalf("Pinned() = %v, %d; want true, 100", pinned, pc)
	}
	l.ExitCritical()
	if pinned, _ := l.Pinned(); !pinned {
		t.Fatal("leaving the inner section unpinned the record")
	}
	l.ExitCritical()
	if pinned, pc := l.Pinned(); pinned || pc != 0 {
		t.Fatalf("after leaving both: Pinned() = %v, %d", pinned, pc)
	}
}

// impl is one of the two ways records are kept, for the tests that run
// on both: the public API (the goroutine's word where the build has one)
// and the table.
type impl struct {
	name    string
	bind    func(*Local) uintptr
	restore func(uintptr, *Local)
	unbind  func(uintptr)
	current func() *Local
	of      func(uintptr) *Local
}

var impls = []impl{
	{"api", Bind, Restore, Unbind, Current, Of},
	{"table", tableBind, tableRestore, tableUnbind, tableCurrent, tableOf},
}

// Many goroutines binding, restoring and unbinding at once, enough of them
// to make the table grow and to leave tombstones behind: every goroutine
// must always see its own record and nobody else's.
func TestConcurrent(t *testing.T) {
	for _, m := range impls {
		t.Run(m.name, func(t *testing.T) { testConcurrent(t, m) })
	}
}

func testConcurrent(t *testing.T, m impl) {
	const workers, rounds = 300, 200
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A goroutine must not end bound: the runtime would give its
			// descriptor, word and all, to a later goroutine.
			defer m.unbind(arch.G())
			mine := &Local{}
			other := &Local{}
			for r := 0; r < rounds; r++ {
				g := m.bind(mine)
				if m.current() != mine || m.of(g) != mine {
					errs <- "bound record not seen"
					return
				}
				m.bind(other)
				m.restore(g, mine)
				if m.current() != mine {
					errs <- "Restore did not put the record back"
					return
				}
				m.restore(g, nil)
				if m.current() != nil {
					errs <- "Restore(nil) left a record"
					return
				}
				if r%3 == 0 {
					m.unbind(g)
					if m.current() != nil {
						errs <- "Unbind left a record"
						return
					}
				}
			}
			m.unbind(m.bind(mine))
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if m.current() != nil {
		t.Fatal("the test goroutine has a record")
	}
}

// With many goroutines bound at once, each is found: the table grows.
func TestManyBound(t *testing.T) {
	for _, m := range impls {
		t.Run(m.name, func(t *testing.T) { testGrowth(t, m) })
	}
}

func testGrowth(t *testing.T, m impl) {
	const n = 2000
	ready, release := make(chan uintptr), make(chan struct{})
	locals := make([]*Local, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	for i := range locals {
		locals[i] = &Local{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := m.bind(locals[i])
			defer m.unbind(g)
			ready <- g
			<-release
		}()
	}
	owner := make(map[*Local]int, n)
	for i, l := range locals {
		owner[l] = i
	}
	gs := make(map[uintptr]int)
	for i := 0; i < n; i++ {
		gs[<-ready] = 0
	}
	if len(gs) != n {
		t.Fatalf("%d distinct goroutine keys for %d goroutines", len(gs), n)
	}
	for g := range gs {
		l := m.of(g)
		if l == nil {
			t.Fatalf("goroutine %#x has no record", g)
		}
		i, ok := owner[l]
		if !ok {
			t.Fatalf("goroutine %#x has a record nobody bound", g)
		}
		gs[g] = i
	}
	seen := make(map[int]bool)
	for _, o := range gs {
		seen[o] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records for %d goroutines", len(seen), n)
	}
	close(release)
}

// Push and Pop nest, and a goroutine that pushed and popped leaves no
// record behind for the next goroutine the runtime gives its descriptor:
// thousands of goroutines end, the runtime reuses their descriptors for
// the next ones, and none of those may find a record, under collections
// that would free a record left behind.
func TestPushPopLeavesNothing(t *testing.T) {
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		bad := make(chan string, 100)
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if Current() != nil {
					bad <- "a new goroutine has a record"
					return
				}
				defer Unbind(arch.G()) // whatever the checks below find
				outer, inner := &Local{}, &Local{}
				s1, p1 := Push(outer)
				s2, p2 := Push(inner)
				if p1 != nil || p2 != outer || Current() != inner {
					bad <- "Push did not return what it replaced"
					return
				}
				s2.Pop(p2)
				if Current() != outer {
					bad <- "Pop did not put the outer record back"
					return
				}
				if i%2 == 0 {
					s1.Pop(p1)
				} else {
					Unbind(Bind(outer)) // the portable backend's pairing
				}
			}()
		}
		wg.Wait()
		close(bad)
		for e := range bad {
			t.Fatal(e)
		}
		runtime.GC()
	}
}

// The table's Push and Pop, which the stack-copying backend uses where the
// goroutine's word is refused at start-up: nested pushes return what they
// replaced, pops put it back, and the goroutine keeps its (empty) place.
func TestTablePushPop(t *testing.T) {
	done := make(chan string, 1)
	go func() {
		outer, inner := &Local{}, &Local{}
		s1 := tableSlot()
		p1 := s1.Push(outer)
		s2 := tableSlot()
		p2 := s2.Push(inner)
		defer tableUnbind(arch.G())
		if p1 != nil || p2 != outer || tableCurrent() != inner {
			done <- "Slot.Push on the table did not return what it replaced"
			return
		}
		s2.Pop(p2)
		if tableCurrent() != outer {
			done <- "Pop did not put the outer record back"
			return
		}
		s1.Pop(p1)
		if tableCurrent() != nil || lookup(arch.G()) == nil {
			done <- "after both pops the goroutine should keep an empty place"
			return
		}
		done <- ""
	}()
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
}
