// Package goroutines helps tests compare goroutine counts.
package goroutines

import (
	"runtime"
	"time"
)

// Settled returns runtime.NumGoroutine once it has stopped falling: after
// collecting garbage (so that cleanups of dropped continuations run) and
// seeing the count not fall three polls in a row, or after about two
// seconds. Goroutines that earlier work left finishing must not count in a
// baseline that a later check relies on.
func Settled() int {
	n := runtime.NumGoroutine()
	for stable, i := 0, 0; stable < 3 && i < 200; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m < n {
			stable = 0
		} else {
			stable++
		}
		n = m
	}
	return n
}
