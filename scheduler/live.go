package scheduler

import (
	"math"
	"sync/atomic"
)

// Live returns the number of virtual threads started and not finished.
// While others start and finish, it is a count the scheduler had at some
// moment during the call, or, if threads end during every try to take
// one, a count that includes every virtual thread live throughout the
// call and possibly some that started and ended during it.
func (s *Scheduler) Live() int {
	s.check("Live")
	best := int64(math.MaxInt64)
	for range liveTries {
		n, stable := s.liveSnapshot()
		if stable {
			return int(n)
		}
		// Each try counts at least the threads live throughout it: the
		// least counts the fewest that were not.
		best = min(best, n)
	}
	return int(best)
}

// liveTries is how many times Live tries for a snapshot in which no
// virtual thread ended.
const liveTries = 8

// liveSnapshot is liveCount with the ended counts read again after the
// started ones. It reports whether none moved. Each count only grows, so
// equal sums mean equal counts. If none moved, no thread ended while the
// started counts were read. The count then only grew, one start at a
// time, and the result is one it had.
func (s *Scheduler) liveSnapshot() (n int64, stable bool) {
	e := s.endedSum()
	n = s.startedSum() - e
	return n, s.endedSum() == e
}

func (s *Scheduler) endedSum() int64 {
	e := s.outside.ended.Load()
	for _, c := range s.carriers {
		e += c.count.ended.Load()
	}
	return e
}

func (s *Scheduler) startedSum() int64 {
	n := s.outside.started.Load()
	for _, c := range s.carriers {
		n += c.count.started.Load()
	}
	return n
}

// A liveShard counts the virtual threads started and ended at one place;
// a thread may end at another place than it started.
type liveShard struct {
	started, ended atomic.Int64
}

// shard returns where a virtual thread started or ended by code running
// on c is counted (c nil: not on a carrier of s). It is c's shard, written
// only by what c runs. A compensation carrier may exit with its counts,
// so it uses the shared one.
func (s *Scheduler) shard(c *carrier) *liveShard {
	if c == nil || c.temp {
		return &s.outside
	}
	return &c.count
}

// liveCount adds up the shards. It reads every ended count before any
// started count. A thread's start comes before its end, so a thread
// counted ended is counted started too. So the sum is never less than the
// number of threads live throughout the reads. It may be more: threads
// that start and end while it reads are counted. Once closing is set, it
// is 0 only when none is live. A start after that either sees closing and
// counts itself out, or is counted here: it counts itself in before it
// loads closing, and the caller stored or saw closing before this call.
func (s *Scheduler) liveCount() int64 {
	e := s.endedSum()
	return s.startedSum() - e
}
