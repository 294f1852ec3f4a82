//go:build go1.27

package continuation_test

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scope"
)

// Go 1.27 has generic methods: a method with type parameters of its own,
// compiled, like a generic function, to shape-instantiated code that takes
// a dictionary as a hidden argument. Freeze and thaw must carry such frames
// (the dictionary, and values of both the type's and the method's type
// parameters, pointers and not) as they do any other. The bodies here yield
// from under a recursion of generic methods of generic types, and from a
// closure a generic method made, collecting garbage between every yield and
// resume and growing the stack after each resume, on alternating
// goroutines, and check every value after every resume.

type gmBox[A any] struct {
	seed uint64
	val  A
}

// descend recurses depth levels through a generic method with its own type
// parameter, keeping values of both in every frame, and yields yields
// times at the bottom. It returns how many values changed across the
// yields.
//
//go:noinline
func (b *gmBox[A]) descend[B fmt.Stringer](s *scope.Scope, depth, yields int, mk func(uint64) B) (bad int) {
	mine := b.val
	other := mk(b.seed + uint64(depth))
	want := other.String()
	tag := strconv.FormatUint(b.seed^uint64(depth), 36) // on the heap
	arr := [3]uint64{b.seed, uint64(depth), b.seed * uint64(depth+1)}
	if depth > 0 {
		bad = b.descend(s, depth-1, yields, mk)
	} else {
		for range yields {
			if !continuation.Yield(s) {
				return -1
			}
		}
	}
	if fmt.Sprint(mine) != fmt.Sprint(b.val) || other.String() != want ||
		tag != strconv.FormatUint(b.seed^uint64(depth), 36) ||
		arr != [3]uint64{b.seed, uint64(depth), b.seed * uint64(depth+1)} {
		bad++
	}
	return bad
}

// gmName is a fmt.Stringer whose string lives on the heap.
type gmName struct{ s *string }

func (n gmName) String() string { return *n.s }

func gmMake(w uint64) gmName {
	s := "name-" + strconv.FormatUint(w, 16)
	return gmName{&s}
}

// closure returns a closure that captures values of both type parameters
// and yields from inside itself.
//
//go:noinline
func (b gmBox[A]) closure[B comparable](s *scope.Scope, k B) func(int) bool {
	held := []B{k, k}
	return func(n int) bool {
		for range n {
			continuation.Yield(s)
		}
		return held[0] == k && held[1] == k && fmt.Sprint(b.val) != ""
	}
}

func TestGenericMethodFrames(t *testing.T) {
	s := scope.New("generic methods")
	const depth, yields = 200, 6
	badc := make(chan int, 1)
	c := continuation.New(s, func() {
		strVal := "payload"
		box := &gmBox[*string]{seed: 0x9e3779b9, val: &strVal}
		bad := box.descend(s, depth, yields, gmMake)
		intBox := &gmBox[[4]int]{seed: 7, val: [4]int{1, 2, 3, 4}}
		bad += intBox.descend(s, depth/4, yields, gmMake)
		f := gmBox[map[string]int]{val: map[string]int{"k": 1}}.closure(s, "key")
		if !f(yields) {
			bad++
		}
		badc <- bad
	})
	runs := 0
	for !c.IsDone() {
		runtime.GC()
		done := make(chan struct{})
		resume := func() {
			defer close(done)
			c.Run()
			runtime.GC()
			gcsRecurse(2000, uint64(runs)) // grow this stack after the resume
		}
		if runs%2 == 0 {
			resume()
		} else {
			go resume()
		}
		<-done
		runs++
	}
	if bad := <-badc; bad != 0 {
		t.Fatalf("%d frames of generic methods found their values changed", bad)
	}
	if runs != 3*yields+1 {
		t.Fatalf("the body ran %d times, want %d", runs, 3*yields+1)
	}
	if st := c.Stats(); gcsStackCopy() && st.FramesFrozen < uint64(yields)*depth {
		t.Errorf("Stats %+v: want at least %d frames frozen per yield", st, depth)
	}
}
