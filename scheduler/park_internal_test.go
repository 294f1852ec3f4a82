package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestParkUnpark(t *testing.T) {
	s := newTest(t, Options{})
	var stage atomic.Int32
	vt, _ := s.Go(func(ctx context.Context) error {
		stage.Store(1)
		for stage.Load() != 2 {
			Park()
		}
		stage.Store(3)
		return nil
	})
	for stage.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	stage.Store(2)
	vt.Unpark()
	if err := vt.Join(); err != nil || stage.Load() != 3 {
		t.Fatalf("Join = %v, stage %d", err, stage.Load())
	}
}
