package scheduler

// Fairness: a runnable virtual thread runs within a bounded number of
// picks of the carrier that queued it, whatever the threads above it do.
//
// Every fairPicks-th pick of a carrier is fair. It takes the oldest
// thread of the global queue or of the carrier's own queue, in turn. If
// the one it tries is empty, it tries the other. The other picks take
// the newest of the carrier's own queue, runnext first. So a hand-off's
// partner runs while its data is hot, and a spawn tree is walked depth
// first. Two threads that hand work to each other refill the top of the
// queue at every pick. The fair pick from the bottom runs the threads
// beneath them.
//
// A spawn tree also keeps old threads at the bottom of the queue: the
// siblings of the subtree being walked. Taking them every few fair picks
// would walk the tree breadth first, with thousands of threads live, not
// dozens. So while threads end on the carrier, a fair pick passes over
// the carrier's own oldest: the work above it is finishing. It passes at
// most fairPass turns in a row. The bound:
//
//   - a thread with k threads older than it in the global queue, or in
//     its carrier's queue, runs within 2(k+1)(fairPass+1)·fairPicks
//     picks of that carrier;
//   - within 2(k+1)·fairPicks picks if no thread ends on the carrier
//     meanwhile, as under the hand-offs above.
//
// Steals by other carriers only shorten the wait: they take the oldest
// too.

// fairPicks is how often a carrier's pick is fair: once in this many.
// The Go scheduler likewise looks at its global queue once in 61.
const fairPicks = 61

// fairPass is how many fair turns in a row for its own queue a carrier
// passes over the oldest thread there while threads end on it.
const fairPass = 256

// fairPick takes the oldest virtual thread of the global queue or of c's
// own queue, alternating which it tries first. It returns nil if it
// takes neither. Only next calls it, on c's goroutine, once in fairPicks
// picks. It takes from the bottom of c's queue as a thief does: steal,
// under c.mu, and runnext by compare-and-swap. c's own lock-free takes
// are at the top, and only c's goroutine runs them.
func (c *carrier) fairPick() *VThread {
	s := c.s
	c.fairOwn = !c.fairOwn
	if !c.fairOwn {
		if vt := s.popGlobal(); vt != nil {
			return vt
		}
	}
	// The own queue's turn, or the global queue was empty.
	ended := c.ends
	if ended != c.fairEnded && c.fairPassed < fairPass {
		c.fairEnded = ended
		c.fairPassed++
	} else {
		c.fairEnded = ended
		if vt := c.steal(); vt != nil {
			c.fairPassed = 0
			return vt
		}
	}
	if c.fairOwn {
		return s.popGlobal()
	}
	return nil
}
