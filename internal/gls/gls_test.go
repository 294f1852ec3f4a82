package gls

import (
	"sync"
	"testing"
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

// Many goroutines binding, restoring and unbinding at once, enough of them
// to make the table grow and to leave tombstones behind: every goroutine
// must always see its own record and nobody else's.
func TestTableConcurrent(t *testing.T) {
	const workers, rounds = 300, 200
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := &Local{}
			other := &Local{}
			for r := 0; r < rounds; r++ {
				g := Bind(mine)
				if Current() != mine || Of(g) != mine {
					errs <- "bound record not seen"
					return
				}
				Bind(other)
				Restore(g, mine)
				if Current() != mine {
					errs <- "Restore did not put the record back"
					return
				}
				Restore(g, nil)
				if Current() != nil {
					errs <- "Restore(nil) left a record"
					return
				}
				if r%3 == 0 {
					Unbind(g)
					if Current() != nil {
						errs <- "Unbind left a record"
						return
					}
				}
			}
			Unbind(Bind(mine))
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if Current() != nil {
		t.Fatal("the test goroutine has a record")
	}
}

// A table with many goroutines bound at once grows, and finds each of them.
func TestTableGrowth(t *testing.T) {
	const n = 2000
	ready, release := make(chan uintptr), make(chan struct{})
	locals := make([]*Local, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range locals {
		locals[i] = &Local{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := Bind(locals[i])
			ready <- g
			<-release
			Unbind(g)
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
		l := Of(g)
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
