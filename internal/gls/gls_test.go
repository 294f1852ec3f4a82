package gls

import (
	"sync"
	"testing"
)

func TestBindIsPerGoroutine(t *testing.T) {
	if Current() != nil {
		t.Fatal("a plain goroutine has a record")
	}
	l := &Local{Owner: "mine"}
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
