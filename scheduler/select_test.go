package scheduler

import (
	"context"
	"fmt"
	"testing"
)

// TestSelectManyCases: a select of more than selectSmall cases,
// with repeats of the same channel, blocks and is woken by a case past
// the eighth.
func TestSelectManyCases(t *testing.T) {
	s := newSched(t, Options{Carriers: 2})
	const n = 20
	chans := make([]*Chan[int], n)
	for i := range chans {
		chans[i] = NewChan[int](0)
	}
	run := func(target int) error {
		dst := make([]int, 2*n)
		cases := make([]Case, 0, 2*n)
		for i := range n {
			cases = append(cases, RecvCase(chans[i], &dst[2*i]))
			cases = append(cases, RecvCase(chans[i], &dst[2*i+1])) // repeat
		}
		i, ok := Select(cases...)
		if i/2 != target || !ok || dst[i] != 100+target {
			return fmt.Errorf("Select = %d, %v, value %d; want case %d or %d with %d", i, ok, dst[i], 2*target, 2*target+1, 100+target)
		}
		for k := range n {
			if r, sd := queued(chans[k]); r != 0 || sd != 0 {
				return fmt.Errorf("chan %d: %d receivers, %d senders left queued", k, r, sd)
			}
		}
		return nil
	}
	for _, target := range []int{0, 9, 15, 19} {
		vt, _ := s.Go(func(context.Context) error { return run(target) })
		waitQueued(t, chans[target], 2, 0)
		chans[target].Send(100 + target)
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- run(target) }()
		waitQueued(t, chans[target], 2, 0)
		chans[target].Send(100 + target)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
