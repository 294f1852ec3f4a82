package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// Stress for the inline hand-off of Send and Recv (sendWait, recvWait):
// the completer pops its partner's node, claims it and wakes it, while
// the partner, a virtual thread, may see the claim without parking and
// start its next Send or Recv on the same kept node, on another channel
// whose lock the completer does not hold. The select stresses
// elsewhere use Select and the timed or context operations, which make a
// node per call; these use plain Send and Recv, whose node is reused.

// handoffAgent runs fn in a virtual thread of s (vt true) or a plain
// goroutine, calling done when it returns.
func handoffAgent(t *testing.T, s *Scheduler, vt bool, done func(), fn func()) {
	t.Helper()
	if !vt {
		go func() { defer done(); fn() }()
		return
	}
	if _, err := s.Go(func(context.Context) error { defer done(); fn(); return nil }); err != nil {
		done()
		t.Fatal(err)
	}
}

// A ring of agents, each receiving a token from the channel before it and
// sending it on to the one after: every Send and Recv of a virtual thread
// moves its kept node to the other channel, and every hand-off is the
// inline one (nothing is buffered, no select). Several tokens go round at
// once, so that completers on different channels race with the owners'
// next operations. Each token must arrive once, with its own id and the
// number of hops it made: a value read from the node after the claim (the
// owner's next one), a value written after it (the owner reads the old
// one), or a wake-up lost (the ring hangs) shows. One virtual thread waits
// pinned every few operations (not in deterministic mode).
func TestChanHandoffRing(t *testing.T) {
	for _, det := range []bool{false, true} {
		t.Run(fmt.Sprint("det=", det), func(t *testing.T) {
			s := newSched(t, Options{Carriers: 4, Deterministic: det, Seed: 3})
			const agents, tokens = 9, 4
			hops := iters(20000, 2000)
			ring := make([]*Chan[uint64], agents)
			for i := range ring {
				ring[i] = NewChan[uint64](0)
			}
			finished := make([]atomic.Int32, tokens)
			var bad atomic.Value
			var wg sync.WaitGroup
			wg.Add(agents)
			for i := range agents {
				// Two of the nine are goroutines: a goroutine's wait is
				// not a kept node, and its wake is a channel send.
				vt := i%4 != 1
				pin := vt && !det && i == 0
				handoffAgent(t, s, vt, wg.Done, func() {
					in, out := ring[i], ring[(i+1)%agents]
					for k := 0; ; k++ {
						var v uint64
						var ok bool
						if pin && k%7 == 0 {
							pinning.Do(func() { v, ok = in.Recv() })
						} else {
							v, ok = in.Recv()
						}
						if !ok {
							return
						}
						id, hop := v>>32, v&(1<<32-1)
						if id >= tokens || hop > uint64(hops) {
							bad.CompareAndSwap(nil, fmt.Sprintf("agent %d got %#x", i, v))
							continue
						}
						if hop == uint64(hops) {
							finished[id].Add(1)
							continue
						}
						if pin && k%7 == 3 {
							pinning.Do(func() { out.Send(v + 1) })
						} else {
							out.Send(v + 1)
						}
					}
				})
			}
			// The tokens start at agents spread round the ring, from a
			// goroutine: each Send waits for its first receiver.
			for id := range uint64(tokens) {
				go ring[id*agents/tokens].Send(id << 32)
			}
			deadline := time.Now().Add(60 * time.Second)
			for n := 0; n < tokens; {
				if time.Now().After(deadline) {
					t.Fatalf("tokens still going round after 60s (a lost wake-up?): finished %v", loads(finished))
				}
				time.Sleep(time.Millisecond)
				n = 0
				for i := range finished {
					n += int(finished[i].Load())
				}
			}
			for _, c := range ring {
				c.Close()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			if !waitDone(t, done, 30*time.Second, "ring agents after Close") {
				return
			}
			if b := bad.Load(); b != nil {
				t.Error(b)
			}
			for id := range finished {
				if n := finished[id].Load(); n != 1 {
					t.Errorf("token %d finished %d times", id, n)
				}
			}
		})
	}
}

func loads(a []atomic.Int32) []int32 {
	out := make([]int32, len(a))
	for i := range a {
		out[i] = a[i].Load()
	}
	return out
}

// Plain Send and Recv by virtual threads and goroutines on both sides,
// roaming over channels of one element type (unbuffered and buffered), so
// that a virtual thread's kept node moves from channel to channel, mixed
// with blocking selects over the same channels, whose stale nodes the
// inline hand-off must skip (and whose winning case it must record).
// Every channel has a receiver of its own, so that no Send waits for ever;
// the roaming receivers wait on channels that may get nothing more, until
// Close wakes them with ok false. Every value sent is received exactly
// once, and no wait is left queued.
func TestChanHandoffConservation(t *testing.T) {
	for _, det := range []bool{false, true} {
		t.Run(fmt.Sprint("det=", det), func(t *testing.T) {
			s := newSched(t, Options{Carriers: 4, Deterministic: det, Seed: 5})
			chans := []*Chan[int]{NewChan[int](0), NewChan[int](0), NewChan[int](1), NewChan[int](3)}
			const nch = 4
			const producers = 8
			per := iters(4000, 500)
			total := producers * per
			got := make([]atomic.Int32, total)
			var sentN atomic.Int64
			var bad atomic.Value
			record := func(who string, v int, ok bool) {
				if !ok {
					return
				}
				if v < 0 || v >= total {
					bad.CompareAndSwap(nil, fmt.Sprintf("%s received %d, never sent", who, v))
					return
				}
				got[v].Add(1)
			}

			var pwg sync.WaitGroup
			pwg.Add(producers)
			for p := range producers {
				vt := p%3 != 2
				pin := vt && !det && p == 0
				handoffAgent(t, s, vt, pwg.Done, func() {
					for k := range per {
						v := p*per + k
						j := (p + k*(p+1)) % nch
						switch {
						case k%8 == 3:
							if i, _ := Select(SendCase(chans[j], v), SendCase(chans[(j+1)%nch], v)); i < 0 {
								bad.CompareAndSwap(nil, "blocking Select returned -1")
							}
						case pin && k%8 == 5:
							pinning.Do(func() { chans[j].Send(v) })
						default:
							chans[j].Send(v)
						}
						sentN.Add(1)
					}
				})
			}

			var cwg sync.WaitGroup
			// One receiver of its own per channel, plain Recv until closed:
			// progress for every Send.
			cwg.Add(nch)
			for j := range nch {
				handoffAgent(t, s, j%2 == 0, cwg.Done, func() {
					for {
						v, ok := chans[j].Recv()
						if !ok {
							return
						}
						record("own receiver", v, ok)
					}
				})
			}
			// Roaming receivers: plain Recv on one open channel after
			// another, and a blocking select over all the open ones.
			const roamers = 6
			cwg.Add(roamers)
			for r := range roamers {
				vt := r%3 != 1
				pin := vt && !det && r == 0
				handoffAgent(t, s, vt, cwg.Done, func() {
					var open [nch]bool
					for j := range open {
						open[j] = true
					}
					var vs [nch]int
					nopen := nch
					for k := 0; nopen > 0; k++ {
						j := (r + k) % nch
						if !open[j] {
							continue
						}
						var v int
						var ok bool
						switch {
						case k%5 == 2:
							var cs [nch]Case
							for i := range cs {
								if open[i] {
									cs[i] = RecvCase(chans[i], &vs[i])
								}
							}
							j, ok = Select(cs[:]...)
							v = vs[j]
						case pin && k%5 == 4:
							pinning.Do(func() { v, ok = chans[j].Recv() })
						default:
							v, ok = chans[j].Recv()
						}
						if !ok {
							if v != 0 {
								bad.CompareAndSwap(nil, fmt.Sprintf("closed receive gave %d", v))
							}
							open[j] = false
							nopen--
							continue
						}
						record("roamer", v, ok)
					}
				})
			}

			pdone := make(chan struct{})
			go func() { pwg.Wait(); close(pdone) }()
			if !waitDone(t, pdone, 60*time.Second, fmt.Sprintf("producers (%d of %d sent)", sentN.Load(), total)) {
				return
			}
			for _, c := range chans {
				c.Close()
			}
			cdone := make(chan struct{})
			go func() { cwg.Wait(); close(cdone) }()
			if !waitDone(t, cdone, 30*time.Second, "receivers after Close") {
				return
			}
			if b := bad.Load(); b != nil {
				t.Error(b)
			}
			lost, dup := 0, 0
			for v := range got {
				switch n := got[v].Load(); {
				case n == 0:
					if lost++; lost <= 5 {
						t.Errorf("value %d never received", v)
					}
				case n > 1:
					if dup++; dup <= 5 {
						t.Errorf("value %d received %d times", v, n)
					}
				}
			}
			if lost+dup > 0 {
				t.Errorf("%d values lost, %d received more than once, of %d", lost, dup, total)
			}
			for i, c := range chans {
				if r, sd := queued(c); r != 0 || sd != 0 {
					t.Errorf("chan %d: %d receivers, %d senders still queued", i, r, sd)
				}
			}
		})
	}
}

// Close while plain Sends and Recvs of virtual threads and goroutines are
// queued or under way: every value that a Send returned from is received
// once, every Send that Close cut short panics with errSendClosed (its
// value received by nobody), every Recv that Close cut short gets 0,
// false. By round: Close in the middle of the stream of hand-offs; once
// the receivers have gone and senders are left queued; once the senders
// are done and receivers are left queued. Buffer capacity 0, 1 or 2.
func TestChanHandoffCloseQueued(t *testing.T) {
	s := newSched(t, Options{Carriers: 3})
	rounds := iters(180, 36)
	for round := range rounds {
		mode, capacity := round%3, round/3%3
		c := NewChan[int](capacity)
		const senders, receivers, per = 6, 6, 40
		total := senders * per
		got := make([]atomic.Int32, total)
		sent := make([]atomic.Int32, total)
		var panics, closedRecv, received, sendersDone atomic.Int32
		var bad atomic.Value
		var swg, rwg sync.WaitGroup
		swg.Add(senders)
		for p := range senders {
			handoffAgent(t, s, p%2 == 0, swg.Done, func() {
				defer func() {
					if r := recover(); r != nil {
						if r != errSendClosed {
							bad.CompareAndSwap(nil, fmt.Sprint("sender panicked: ", r))
						}
						panics.Add(1)
					}
				}()
				for k := range per {
					v := p*per + k
					c.Send(v)
					sent[v].Add(1)
				}
				sendersDone.Add(1)
			})
		}
		// In mode 1 the receivers take half the values and go; else
		// each waits for Close, even one that got every value.
		quota := total + 1
		if mode == 1 {
			quota = total / 2 / receivers
		}
		rwg.Add(receivers)
		for r := range receivers {
			handoffAgent(t, s, r%2 == 1, rwg.Done, func() {
				for range quota {
					v, ok := c.Recv()
					if !ok {
						if v != 0 {
							bad.CompareAndSwap(nil, fmt.Sprintf("closed receive gave %d", v))
						}
						closedRecv.Add(1)
						return
					}
					if v < 0 || v >= total {
						bad.CompareAndSwap(nil, fmt.Sprintf("received %d, never sent", v))
						continue
					}
					got[v].Add(1)
					received.Add(1)
				}
			})
		}
		var ready func() bool
		switch mode {
		case 0: // mid-stream
			ready = func() bool { return received.Load() >= int32(total/4+round%(total/2)) }
		case 1: // the receivers gone, the senders still sending queued
			rdone := make(chan struct{})
			go func() { rwg.Wait(); close(rdone) }()
			if !waitDone(t, rdone, 30*time.Second, fmt.Sprintf("round %d: receivers", round)) {
				return
			}
			ready = func() bool {
				_, sd := queued(c)
				return sd+int(sendersDone.Load()) == senders
			}
		case 2: // the senders done, every receiver queued
			ready = func() bool {
				r, _ := queued(c)
				return sendersDone.Load() == senders && r == receivers
			}
		}
		for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(20 * time.Microsecond) {
			if time.Now().After(deadline) {
				r, sd := queued(c)
				t.Errorf("round %d (mode %d, capacity %d): not ready to close (a lost wake-up?): %d receivers and %d senders queued, %d buffered, %d senders done, %d values received",
					round, mode, capacity, r, sd, c.Len(), sendersDone.Load(), received.Load())
				if os.Getenv("WEFT_TEST_DUMP") != "" {
					buf := make([]byte, 1<<20)
					t.Logf("%s", buf[:runtime.Stack(buf, true)])
				}
				c.Close() // let the agents go
				t.FailNow()
			}
		}
		c.Close()
		done := make(chan struct{})
		go func() { swg.Wait(); rwg.Wait(); close(done) }()
		if !waitDone(t, done, 30*time.Second, fmt.Sprintf("round %d: waiters after Close", round)) {
			return
		}
		// What the buffer held when the receivers went (mode 1) can
		// still be received.
		for {
			v, ok := c.Recv()
			if !ok {
				break
			}
			got[v].Add(1)
		}
		if b := bad.Load(); b != nil {
			t.Fatalf("round %d: %v", round, b)
		}
		for v := range total {
			if sn, gn := sent[v].Load(), got[v].Load(); sn != gn {
				t.Fatalf("round %d (mode %d): value %d: Send returned %d times, received %d times", round, mode, v, sn, gn)
			}
		}
		switch {
		case mode == 1 && int(panics.Load()) != senders-int(sendersDone.Load()):
			t.Fatalf("round %d: %d Sends panicked, want %d", round, panics.Load(), senders-int(sendersDone.Load()))
		case mode == 1 && panics.Load() == 0:
			t.Fatalf("round %d: no Send was left queued", round)
		case mode == 2 && (closedRecv.Load() != receivers || panics.Load() != 0):
			t.Fatalf("round %d: %d Recvs saw the close, %d Sends panicked; want %d and 0", round, closedRecv.Load(), panics.Load(), receivers)
		case mode == 0 && int(closedRecv.Load())+int(panics.Load()) == 0:
			t.Fatalf("round %d: nobody saw the close", round)
		}
		if r, sd := queued(c); r != 0 || sd != 0 {
			t.Fatalf("round %d: %d receivers, %d senders still queued", round, r, sd)
		}
	}
}
