package bench

import (
	"iter"

	"github.com/weftrt/weft/continuation"
)

// A coroutine is a typed asymmetric coroutine: resume passes a value in
// and returns the value the body yields.
type coroutine interface {
	resume(int) int
	isDone() bool
}

// incr is the body both coroutines run: it yields in+1 for each in until
// it gets a negative in, which it returns.
func incr(in int, yield func(int) int) int {
	for in >= 0 {
		in = yield(in + 1)
	}
	return in
}

type weftCoroutine struct {
	co *continuation.Coroutine[int, int]
}

func newWeftCoroutine() coroutine {
	return weftCoroutine{continuation.NewCoroutine(incr)}
}

func (c weftCoroutine) resume(in int) int { return c.co.Resume(in) }
func (c weftCoroutine) isDone() bool      { return c.co.IsDone() }

// pullCoroutine is the same coroutine written by hand on iter.Pull, the
// way one would without weft.
type pullCoroutine struct {
	in, out int
	done    bool
	next    func() (struct{}, bool)
}

func newPullCoroutine() coroutine {
	c := &pullCoroutine{}
	c.next, _ = iter.Pull(func(yield func(struct{}) bool) {
		c.out = incr(c.in, func(out int) int {
			c.out = out
			yield(struct{}{})
			return c.in
		})
	})
	return c
}

func (c *pullCoroutine) resume(in int) int {
	c.in = in
	if _, ok := c.next(); !ok {
		c.done = true
	}
	return c.out
}

func (c *pullCoroutine) isDone() bool { return c.done }

var coroutines = []struct {
	name string
	new  func() coroutine
}{
	{"weft", newWeftCoroutine},
	{"iter.Pull", newPullCoroutine},
}
