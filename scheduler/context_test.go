package scheduler

import (
	"context"
	"errors"
	"testing"
)

type ctxKey struct{}

// A virtual thread's context carries its parent's values and cancellation
// and the virtual thread itself; Done works before and after the end.
func TestVThreadContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	s := newTest(t, Options{Context: parent})
	started := make(chan struct{})
	vt, err := s.Go(func(ctx context.Context) error {
		if got := FromContext(ctx); got != Current() || got == nil {
			return errors.New("FromContext does not find the virtual thread")
		}
		if ctx.Value(ctxKey{}) != "v" {
			return errors.New("the parent's value is lost")
		}
		child, stop := context.WithCancel(ctx)
		defer stop()
		if FromContext(child) != Current() {
			return errors.New("FromContext does not see through a derived context")
		}
		close(started)
		<-ctx.Done() // blocks the carrier; only the parent's cancel ends it
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	select {
	case <-vt.Done():
		t.Fatal("Done closed before the end")
	default:
	}
	cancel()
	<-vt.Done()
	if err := vt.Join(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Join: %v, want context.Canceled", err)
	}
	<-vt.Done() // made after the end: closed already
	if FromContext(context.Background()) != nil || FromContext(vt.Context()) != vt {
		t.Fatal("FromContext outside a virtual thread")
	}
}
