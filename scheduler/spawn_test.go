package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/weftrt/weft"
)

func TestPanicSurfaces(t *testing.T) {
	var handled atomic.Int32
	s := newTest(t, Options{OnPanic: func(*VThread, any) { handled.Add(1) }})
	vt, _ := s.Go(func(ctx context.Context) error { panic("oops") })
	var pe *PanicError
	if err := vt.Join(); !errors.As(err, &pe) || pe.Value != "oops" {
		t.Fatalf("Join = %v", err)
	}
	if handled.Load() != 1 {
		t.Fatalf("OnPanic called %d times", handled.Load())
	}
	// The carriers survive.
	vt, _ = s.Go(func(ctx context.Context) error { return nil })
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}

// Virtual threads started from a virtual thread reuse the continuation
// records of those that ended on its carrier. Each generation here parks
// and yields with heap pointers and addresses of its own locals live
// across the suspensions, under runtime.GC, in a record that earlier
// generations froze their frames into: nothing of theirs may show.
func TestContReuse(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	const gens = 40
	var seen []*weft.Cont
	parent, err := s.Go(func(ctx context.Context) error {
		for gen := range gens {
			child, err := s.Go(func(ctx context.Context) error {
				seen = append(seen, Current().cont)
				local := [3]int{gen, gen, gen}
				p := &local[1]
				h := &struct{ v []int }{v: []int{gen}}
				for i := range 3 {
					Current().Unpark()
					Park()
					runtime.GC()
					Yield()
					*p += i
					h.v = append(h.v, gen+i)
				}
				if local != [3]int{gen, gen + 3, gen} || len(h.v) != 4 || h.v[3] != gen+2 {
					return fmt.Errorf("generation %d: locals %v and heap %v after its suspensions", gen, local, h.v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err := child.Join(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Join(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != gens {
		t.Fatalf("%d generations ran, want %d", len(seen), gens)
	}
	for i := 1; i < gens; i++ {
		if seen[i] != seen[0] {
			t.Fatalf("generation %d ran in another continuation record than generation 0: records are not reused", i)
		}
	}
}

// TestFreeRecordKeepsSlot: a record that Go takes from its carrier's free
// records stays in its slot past their length, and comes back to it with
// nothing else changed when its virtual thread ends on that carrier
// (newCont and carrier.keep store no pointer either way, which the
// collector's write barrier would cost while it marks).
func TestFreeRecordKeepsSlot(t *testing.T) {
	s := newTest(t, Options{Carriers: 1})
	nop := func(context.Context) error { return nil }
	vt, err := s.Go(func(context.Context) error {
		c := Current().carrier
		for range 2 { // leave a record on c
			child, err := s.Go(nop)
			if err != nil {
				return err
			}
			if err := child.Join(); err != nil {
				return err
			}
		}
		n := len(c.free)
		if n == 0 {
			return errors.New("no record kept on the carrier after two children ended there")
		}
		kept := c.free[n-1]
		child, err := s.Go(nop)
		if err != nil {
			return err
		}
		if child.cont != kept || len(c.free) != n-1 || c.free[:n][n-1] != kept {
			return fmt.Errorf("Go took record %p, left %d free and %p in the slot past them; want %p, %d, %p",
				child.cont, len(c.free), c.free[:n][n-1], kept, n-1, kept)
		}
		if err := child.Join(); err != nil {
			return err
		}
		if len(c.free) != n || c.free[n-1] != kept {
			return fmt.Errorf("after the child ended: free records %p; want %d, the last %p", c.free, n, kept)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
}
