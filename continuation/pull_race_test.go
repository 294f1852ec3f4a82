package continuation_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/weftrt/weft/continuation"
)

// Concurrent next calls are misuse; the documented outcome is an
// ErrMounted panic in the losers, and it must not be a data race.
func TestPullConcurrentNextIsErrMounted(t *testing.T) {
	for round := 0; round < 50; round++ {
		release := make(chan struct{})
		entered := make(chan struct{})
		next, stop := continuation.Pull(func(yield func(int) bool) {
			close(entered)
			<-release // hold the first next inside seq
			yield(1)
		})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); next() }()
		<-entered
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, continuation.ErrMounted) {
					t.Errorf("concurrent next panicked with %v, want ErrMounted", err)
				}
			}()
			next()
		}()
		close(release)
		wg.Wait()
		stop()
	}
}
