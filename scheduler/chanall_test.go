package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/pinning"
)

// chanAllSend sends 0..n-1 on ch from a virtual thread of s and closes it.
func chanAllSend(t *testing.T, s *Scheduler, ch *Chan[int], n int) *VThread {
	t.Helper()
	vt, err := s.Go(func(context.Context) error {
		for i := range n {
			ch.Send(i)
		}
		ch.Close()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return vt
}

// A range over All takes every value, in order, until the channel is
// closed and drained: in a virtual thread (which parks for each value of
// an unbuffered channel, on one carrier with the sender) and in a plain
// goroutine.
func TestChanAll(t *testing.T) {
	for _, capacity := range []int{0, 1, 64} {
		s := newSched(t, Options{Carriers: 1, MaxCompensation: -1})
		const n = 1000
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		ch := NewChan[int](capacity)
		var got []int
		recv, _ := s.Go(func(context.Context) error {
			for v := range ch.All() {
				got = append(got, v)
			}
			return nil
		})
		send := chanAllSend(t, s, ch, n)
		if err := errorsJoin(recv.Join(), send.Join()); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("capacity %d: a virtual thread ranging over All got %d values %v..., want 0..%d", capacity, len(got), got[:min(len(got), 8)], n-1)
		}
		if pins := s.Pins(); len(pins) != 0 {
			t.Errorf("capacity %d: pinned: %v", capacity, pins)
		}

		ch = NewChan[int](capacity)
		send = chanAllSend(t, s, ch, n)
		got = got[:0]
		for v := range ch.All() { // a plain goroutine: blocks
			got = append(got, v)
		}
		if err := send.Join(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("capacity %d: a goroutine ranging over All got %d values, want %d", capacity, len(got), n)
		}
	}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// A loop over All that stops early leaves the rest of the values in the
// channel, and ranging over a closed, drained channel ends at once.
func TestChanAllStopsEarly(t *testing.T) {
	ch := NewChan[int](10)
	for i := range 10 {
		ch.Send(i)
	}
	ch.Close()
	var first []int
	for v := range ch.All() {
		first = append(first, v)
		if v == 3 {
			break
		}
	}
	var rest []int
	for v := range ch.All() {
		rest = append(rest, v)
	}
	if !slices.Equal(first, []int{0, 1, 2, 3}) || !slices.Equal(rest, []int{4, 5, 6, 7, 8, 9}) {
		t.Fatalf("first loop %v, second %v", first, rest)
	}
	for v := range ch.All() {
		t.Fatalf("a closed, drained channel gave %d", v)
	}
}

// What All's doc says of a defer statement in the loop's body: the
// enclosing function gets a heap defer record, which pins the virtual
// thread's waits (they block the carrier), and the loop still takes every
// value, in order.
func TestChanAllDeferInBody(t *testing.T) {
	if !strings.HasPrefix(continuation.Backend(), "stackcopy") {
		t.Skipf("the portable backend does not pin on defer records: %s", continuation.Backend())
	}
	s := newSched(t, Options{Carriers: 1})
	ch := NewChan[int](0)
	deferred := 0
	var got []int
	recv, _ := s.Go(func(context.Context) error {
		func() {
			for v := range ch.All() {
				defer func() { deferred++ }()
				got = append(got, v)
			}
		}()
		return nil
	})
	send := chanAllSend(t, s, ch, 50)
	if err := errorsJoin(recv.Join(), send.Join()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 || got[49] != 49 || deferred != 50 {
		t.Fatalf("got %d values (last %v), %d deferred calls ran; want 50, 50", len(got), got[len(got)-1:], deferred)
	}
	var deferPins uint64
	for _, p := range s.Pins() {
		if p.Reason == pinning.DeferRecord {
			deferPins += p.Count
		}
	}
	if deferPins == 0 {
		t.Fatalf("no wait was pinned by the defer record: %v", s.Pins())
	}
}
