package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft/pinning"
)

// queued returns how many receivers and senders wait on c.
func queued[T any](c *Chan[T]) (recv, send int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := c.recvq.head; n != nil; n = n.next {
		recv++
	}
	for n := c.sendq.head; n != nil; n = n.next {
		send++
	}
	return recv, send
}

// waitQueued waits until c has at least recv receivers and send senders
// waiting.
func waitQueued[T any](t *testing.T, c *Chan[T], recv, send int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, s := queued(c)
		if r >= recv && s >= send {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d receivers and %d senders queued, want %d and %d", r, s, recv, send)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestChanCarrierFree(t *testing.T) {
	// The scenario: one carrier, one virtual thread blocked in
	// Recv, another that must still run and send.
	s := newSched(t, Options{Carriers: 1, MaxCompensation: -1})
	ch := NewChan[int](0)
	got := make(chan int, 1)
	r, _ := s.Go(func(context.Context) error {
		v, _ := ch.Recv()
		got <- v
		return nil
	})
	waitQueued(t, ch, 1, 0)
	s.Go(func(context.Context) error { ch.Send(42); return nil })
	select {
	case v := <-got:
		if v != 42 {
			t.Fatalf("received %d", v)
		}
	case <-time.After(5 * time.Second):
		t.Error("the sender never ran: Recv blocked the carrier")
		ch.TrySend(0) // unblock for the cleanup
	}
	r.Join()

	t.Run("Send", func(t *testing.T) {
		ch := NewChan[int](0)
		carrierFree(t, func() { ch.Send(1) }, func() { ch.Recv() })
	})
	t.Run("Select", func(t *testing.T) {
		a, b := NewChan[int](0), NewChan[string](1)
		var v int
		carrierFree(t, func() { Select(RecvCase(a, &v), SendCase(a, 1), RecvCase(b, nil)) }, func() { b.Send("x") })
	})
	t.Run("RecvTimeout", func(t *testing.T) {
		ch := NewChan[int](0)
		carrierFree(t, func() { ch.RecvTimeout(time.Hour) }, func() { ch.Send(1) })
	})
}

// sendAll has nv virtual threads and ng goroutines each send perSender
// values {sender, seq} on ch, then closes ch.
type msg struct{ sender, seq int }

func sendAll(t *testing.T, s *Scheduler, ch *Chan[msg], nv, ng, perSender int) {
	var wg sync.WaitGroup
	wg.Add(nv + ng)
	send := func(id int) {
		defer wg.Done()
		for k := range perSender {
			ch.Send(msg{id, k})
		}
	}
	for i := range nv {
		s.Go(func(context.Context) error { send(i); return nil })
	}
	for i := range ng {
		go send(nv + i)
	}
	go func() { wg.Wait(); ch.Close() }()
}

func TestChanFIFOPerSender(t *testing.T) {
	for _, capacity := range []int{0, 1, 16} {
		t.Run(fmt.Sprintf("cap%d", capacity), func(t *testing.T) {
			s := newSched(t, Options{})
			const nv, ng = 6, 3
			per := iters(2000, 300)
			ch := NewChan[msg](capacity)
			sendAll(t, s, ch, nv, ng, per)
			// Receivers, virtual threads and goroutines: each must see
			// every sender's values in increasing order, and together
			// they must see each value once.
			var mu sync.Mutex
			counts := make([]int, nv+ng)
			mixed(t, s, 3, 2, func(int) {
				last := make([]int, nv+ng)
				for i := range last {
					last[i] = -1
				}
				for {
					m, ok := ch.Recv()
					if !ok {
						break
					}
					if m.seq <= last[m.sender] {
						t.Errorf("sender %d: %d after %d", m.sender, m.seq, last[m.sender])
					}
					last[m.sender] = m.seq
					mu.Lock()
					counts[m.sender]++
					mu.Unlock()
				}
			})
			for i, n := range counts {
				if n != per {
					t.Errorf("sender %d: %d values received, want %d", i, n, per)
				}
			}
		})
	}
}

func TestChanSingleReceiverOrder(t *testing.T) {
	for _, capacity := range []int{0, 3} {
		s := newSched(t, Options{})
		ch := NewChan[msg](capacity)
		const senders, per = 5, 500
		sendAll(t, s, ch, 3, 2, per)
		r, _ := s.Go(func(context.Context) error {
			next := make([]int, senders)
			for m, ok := ch.Recv(); ok; m, ok = ch.Recv() {
				if m.seq != next[m.sender] {
					return fmt.Errorf("cap %d: sender %d: got %d, want %d", capacity, m.sender, m.seq, next[m.sender])
				}
				next[m.sender]++
			}
			for i, n := range next {
				if n != per {
					return fmt.Errorf("sender %d: %d received", i, n)
				}
			}
			return nil
		})
		if err := r.Join(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestChanRendezvousAndBuffer(t *testing.T) {
	s := newSched(t, Options{})
	un := NewChan[int](0)
	if un.Cap() != 0 || un.TrySend(1) {
		t.Fatal("TrySend on an unbuffered channel without a receiver succeeded")
	}
	if _, _, ready := un.TryRecv(); ready {
		t.Fatal("TryRecv on an empty channel was ready")
	}
	var sent atomic.Bool
	vt, _ := s.Go(func(context.Context) error { un.Send(7); sent.Store(true); return nil })
	waitQueued(t, un, 0, 1)
	if sent.Load() {
		t.Fatal("an unbuffered Send completed without a receiver")
	}
	if v, ok := un.Recv(); v != 7 || !ok {
		t.Fatalf("Recv = %d, %v", v, ok)
	}
	vt.Join()
	// A waiting receiver makes TrySend succeed.
	got := make(chan int, 1)
	s.Go(func(context.Context) error { v, _ := un.Recv(); got <- v; return nil })
	waitQueued(t, un, 1, 0)
	if !un.TrySend(8) {
		t.Fatal("TrySend to a waiting receiver failed")
	}
	if v := <-got; v != 8 {
		t.Fatalf("received %d", v)
	}

	b := NewChan[int](3)
	for i := range 3 {
		if !b.TrySend(i) {
			t.Fatalf("TrySend %d into a buffer of 3 failed", i)
		}
	}
	if b.TrySend(3) || b.Len() != 3 || b.Cap() != 3 {
		t.Fatalf("full buffer: TrySend succeeded or Len %d Cap %d", b.Len(), b.Cap())
	}
	// A blocked sender's value joins the buffer behind the others as soon
	// as a receive makes room, and the sender goes on.
	sender, _ := s.Go(func(context.Context) error { b.Send(3); return nil })
	waitQueued(t, b, 0, 1)
	if v, ok := b.Recv(); v != 0 || !ok {
		t.Fatalf("Recv = %d, %v, want 0", v, ok)
	}
	done := make(chan struct{})
	go func() { sender.Join(); close(done) }()
	waitDone(t, done, 5*time.Second, "a sender blocked on a full buffer, after a receive")
	if b.Len() != 3 {
		t.Fatalf("Len = %d, want 3", b.Len())
	}
	for i := 1; i < 4; i++ {
		if v, ok := b.Recv(); v != i || !ok {
			t.Fatalf("Recv = %d, %v, want %d", v, ok, i)
		}
	}
	if b.Len() != 0 {
		t.Fatalf("Len = %d", b.Len())
	}
}

func TestChanClose(t *testing.T) {
	ch := NewChan[string](3)
	ch.Send("a")
	ch.Send("b")
	ch.Close()
	for _, want := range []string{"a", "b"} {
		if v, ok := ch.Recv(); v != want || !ok {
			t.Fatalf("Recv = %q, %v, want %q", v, ok, want)
		}
	}
	for range 2 {
		if v, ok := ch.Recv(); v != "" || ok {
			t.Fatalf("Recv after drain = %q, %v", v, ok)
		}
	}
	if _, ok, ready := ch.TryRecv(); !ready || ok {
		t.Fatalf("TryRecv on closed: ok %v ready %v", ok, ready)
	}
	for name, f := range map[string]func(){
		"Send":    func() { ch.Send("c") },
		"TrySend": func() { ch.TrySend("c") },
		"Select":  func() { Select(SendCase(ch, "c")) },
	} {
		if msg := mustPanic(t, f); !strings.Contains(msg, "send on closed Chan") {
			t.Errorf("%s on closed panicked with %q", name, msg)
		}
	}
	if msg := mustPanic(t, ch.Close); !strings.Contains(msg, "close of closed Chan") {
		t.Errorf("double Close panicked with %q", msg)
	}
	var v string
	if i, ok := Select(RecvCase(ch, &v)); i != 0 || ok {
		t.Fatalf("Select on closed = %d, %v", i, ok)
	}
}

func TestChanCloseWakesWaiters(t *testing.T) {
	s := newSched(t, Options{})
	for _, capacity := range []int{0, 2} {
		rc := NewChan[int](capacity)
		sc := NewChan[int](capacity)
		for range capacity {
			sc.Send(0)
		}
		var results sync.Map
		var wg sync.WaitGroup
		var vts []*VThread
		recv := func(i int) {
			defer wg.Done()
			v, ok := rc.Recv()
			results.Store(i, fmt.Sprint(v, ok))
		}
		send := func(i int) {
			defer wg.Done()
			defer func() { results.Store(100+i, fmt.Sprint(recover())) }()
			sc.Send(1)
		}
		wg.Add(8)
		for i := range 2 {
			vt, _ := s.Go(func(context.Context) error { recv(i); return nil })
			vts = append(vts, vt)
			go recv(10 + i)
			vt, _ = s.Go(func(context.Context) error { send(i); return nil })
			vts = append(vts, vt)
			go send(10 + i)
		}
		waitQueued(t, rc, 4, 0)
		waitQueued(t, sc, 0, 4)
		rc.Close()
		sc.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		if !waitDone(t, done, 5*time.Second, "waiters woken by Close") {
			return
		}
		for _, i := range []int{0, 1, 10, 11} {
			if r, _ := results.Load(i); r != "0 false" {
				t.Errorf("cap %d: receiver %d got %v, want 0 false", capacity, i, r)
			}
			if r, _ := results.Load(100 + i); r != errSendClosed {
				t.Errorf("cap %d: sender %d: %v, want panic %q", capacity, i, r, errSendClosed)
			}
		}
		for _, vt := range vts {
			if err := vt.Join(); err != nil {
				t.Error(err)
			}
		}
	}
	// A virtual thread whose Send is cut short by Close ends with the panic.
	ch := NewChan[int](0)
	vt, _ := s.Go(func(context.Context) error { ch.Send(1); return nil })
	waitQueued(t, ch, 0, 1)
	ch.Close()
	var pe *PanicError
	if err := vt.Join(); !errors.As(err, &pe) || pe.Value != errSendClosed {
		t.Fatalf("Join = %v", err)
	}
}

func TestChanTimeouts(t *testing.T) {
	s := newSched(t, Options{})
	check := func() error {
		ch := NewChan[int](0)
		start := time.Now()
		if _, _, ready := ch.RecvTimeout(10 * time.Millisecond); ready {
			return errors.New("RecvTimeout on an empty channel was ready")
		}
		if el := time.Since(start); el < 10*time.Millisecond {
			return fmt.Errorf("RecvTimeout returned after %v", el)
		}
		if ch.TrySend(1) {
			return errors.New("a timed-out receiver took a value")
		}
		if ch.SendTimeout(2, 5*time.Millisecond) {
			return errors.New("SendTimeout without a receiver succeeded")
		}
		if _, _, ready := ch.TryRecv(); ready {
			return errors.New("a timed-out send delivered its value")
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Millisecond, cancel)
		if _, _, err := ch.RecvContext(ctx); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("RecvContext = %v", err)
		}
		if err := ch.SendContext(ctx, 3); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("SendContext = %v", err)
		}
		go func() { ch.Send(4) }()
		if v, ok, ready := ch.RecvTimeout(5 * time.Second); v != 4 || !ok || !ready {
			return fmt.Errorf("RecvTimeout = %d, %v, %v", v, ok, ready)
		}
		go func() { ch.Recv() }()
		if err := ch.SendContext(context.Background(), 5); err != nil {
			return fmt.Errorf("SendContext = %v", err)
		}
		return nil
	}
	vt, _ := s.Go(func(context.Context) error { return check() })
	if err := vt.Join(); err != nil {
		t.Errorf("virtual thread: %v", err)
	}
	if err := check(); err != nil {
		t.Errorf("goroutine: %v", err)
	}
}

func TestSelectFairness(t *testing.T) {
	s := newSched(t, Options{})
	const n = 2000
	a, b := NewChan[int](n), NewChan[int](n)
	for i := range n {
		a.Send(i)
		b.Send(i)
	}
	body := func(rounds int) error {
		var counts [2]int
		next := [2]int{}
		var va, vb int
		cases := []Case{RecvCase(a, &va), RecvCase(b, &vb)}
		for range rounds {
			i, ok := Select(cases...)
			if i < 0 || !ok {
				return fmt.Errorf("Select = %d, %v", i, ok)
			}
			v := va
			if i == 1 {
				v = vb
			}
			if v != next[i] {
				return fmt.Errorf("case %d: got %d, want %d", i, v, next[i])
			}
			next[i]++
			counts[i]++
		}
		if counts[0] < rounds/4 || counts[1] < rounds/4 {
			return fmt.Errorf("with both ready: chose %v", counts)
		}
		return nil
	}
	vt, _ := s.Go(func(context.Context) error { return body(n / 2) })
	if err := vt.Join(); err != nil {
		t.Fatalf("virtual thread: %v", err)
	}
	// The goroutine goes on from where the virtual thread left off, so
	// check only the counts there.
	var counts [2]int
	for range n / 2 {
		i, _ := TrySelect(RecvCase(a, nil), RecvCase(b, nil))
		counts[i]++
	}
	if counts[0] < n/8 || counts[1] < n/8 {
		t.Fatalf("goroutine: chose %v", counts)
	}
}

func TestSelectTimeoutAndDefault(t *testing.T) {
	s := newSched(t, Options{})
	check := func() error {
		a, b := NewChan[int](0), NewChan[int](1)
		b.Send(0) // b is full: a send case on it is not ready
		var v int
		if i, _ := TrySelect(RecvCase(a, &v), SendCase(b, 1)); i != -1 {
			return fmt.Errorf("TrySelect = %d", i)
		}
		if i, _ := TrySelect(); i != -1 {
			return fmt.Errorf("empty TrySelect = %d", i)
		}
		start := time.Now()
		if i, _ := SelectTimeout(10*time.Millisecond, RecvCase(a, &v), SendCase(b, 1), SendCase(a, 2)); i != -1 {
			return fmt.Errorf("SelectTimeout = %d", i)
		}
		if el := time.Since(start); el < 10*time.Millisecond {
			return fmt.Errorf("SelectTimeout returned after %v", el)
		}
		// No stale case left queued.
		if r, s := queued(a); r != 0 || s != 0 {
			return fmt.Errorf("a: %d receivers, %d senders left queued", r, s)
		}
		if r, s := queued(b); r != 0 || s != 0 {
			return fmt.Errorf("b: %d receivers, %d senders left queued", r, s)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Millisecond, cancel)
		if i, _, err := SelectContext(ctx, RecvCase(a, &v)); i != -1 || !errors.Is(err, context.Canceled) {
			return fmt.Errorf("SelectContext = %d, %v", i, err)
		}
		// A value that arrives before the timeout wins.
		go func() { time.Sleep(2 * time.Millisecond); a.Send(9) }()
		if i, ok := SelectTimeout(5*time.Second, RecvCase(a, &v)); i != 0 || !ok || v != 9 {
			return fmt.Errorf("SelectTimeout = %d, %v, v %d", i, ok, v)
		}
		return nil
	}
	vt, _ := s.Go(func(context.Context) error { return check() })
	if err := vt.Join(); err != nil {
		t.Errorf("virtual thread: %v", err)
	}
	if err := check(); err != nil {
		t.Errorf("goroutine: %v", err)
	}
}

// TestSelectGoroutines: plain goroutines select over channels that virtual
// threads send to and receive from.
func TestSelectGoroutines(t *testing.T) {
	s := newSched(t, Options{})
	in1, in2 := NewChan[int](0), NewChan[string](2)
	out := NewChan[int](0)
	n := iters(2000, 300)
	s.Go(func(context.Context) error {
		for i := range n {
			in1.Send(i)
		}
		in1.Close()
		return nil
	})
	s.Go(func(context.Context) error {
		for i := range n {
			in2.Send(fmt.Sprint(i))
		}
		in2.Close()
		return nil
	})
	var outSum atomic.Int64
	outDone := make(chan struct{})
	s.Go(func(context.Context) error {
		defer close(outDone)
		for v, ok := out.Recv(); ok; v, ok = out.Recv() {
			outSum.Add(int64(v))
		}
		return nil
	})
	var sum1, sum2, sent int64
	var v1 int
	var v2 string
	open1, open2 := true, true
	for open1 || open2 {
		cases := []Case{{}, {}, SendCase(out, 1)}
		if open1 {
			cases[0] = RecvCase(in1, &v1)
		}
		if open2 {
			cases[1] = RecvCase(in2, &v2)
		}
		i, ok := Select(cases...)
		switch {
		case i == 0 && ok:
			sum1 += int64(v1)
		case i == 0:
			open1 = false
		case i == 1 && ok:
			var x int64
			fmt.Sscan(v2, &x)
			sum2 += x
		case i == 1:
			open2 = false
		case i == 2:
			sent++
		}
	}
	out.Close()
	waitDone(t, outDone, 5*time.Second, "out receiver")
	want := int64(n) * int64(n-1) / 2
	if sum1 != want || sum2 != want || outSum.Load() != sent {
		t.Fatalf("sums %d %d, want %d; sent %d, received %d", sum1, sum2, want, sent, outSum.Load())
	}
}

// TestSelectStress: producers and consumers, virtual threads and
// goroutines, select over random subsets of shared channels with send and
// receive cases and short timeouts. Every value must arrive exactly once.
func TestSelectStress(t *testing.T) {
	s := newSched(t, Options{})
	chans := []*Chan[int]{NewChan[int](0), NewChan[int](0), NewChan[int](1), NewChan[int](4)}
	const producers = 8
	per := iters(3000, 400)
	total := producers * per
	seen := make([]atomic.Int32, total)
	var received atomic.Int64
	var wg sync.WaitGroup
	produce := func(p int) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(p), 1))
		for k := range per {
			v := p*per + k
			for {
				a, b := r.IntN(len(chans)), r.IntN(len(chans))
				var i int
				if k%3 == 0 {
					i, _ = SelectTimeout(time.Duration(r.IntN(50))*time.Microsecond, SendCase(chans[a], v), SendCase(chans[b], v))
				} else {
					i, _ = Select(SendCase(chans[a], v), SendCase(chans[b], v))
				}
				if i >= 0 {
					break
				}
			}
		}
	}
	consume := func(c int) {
		defer wg.Done()
		var vs [4]int
		cases := make([]Case, len(chans))
		for i, ch := range chans {
			cases[i] = RecvCase(ch, &vs[i])
		}
		r := rand.New(rand.NewPCG(uint64(c), 2))
		for received.Load() < int64(total) {
			var i int
			if r.IntN(2) == 0 {
				i, _ = SelectTimeout(time.Duration(1+r.IntN(200))*time.Microsecond, cases...)
			} else {
				// A suffix of the cases: the index is into the suffix.
				off := r.IntN(len(cases))
				if i, _ = SelectTimeout(time.Millisecond, cases[off:]...); i >= 0 {
					i += off
				}
			}
			if i < 0 {
				continue
			}
			v := vs[i]
			if n := seen[v].Add(1); n != 1 {
				t.Errorf("value %d received %d times", v, n)
			}
			received.Add(1)
		}
	}
	wg.Add(2 * producers)
	for p := range producers {
		if p%2 == 0 {
			s.Go(func(context.Context) error { produce(p); return nil })
			s.Go(func(context.Context) error { consume(p); return nil })
		} else {
			go produce(p)
			go consume(p)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if !waitDone(t, done, 60*time.Second, "select stress") {
		return
	}
	for v := range seen {
		if seen[v].Load() != 1 {
			t.Fatalf("value %d received %d times", v, seen[v].Load())
		}
	}
}

func TestSelectSameChannelAndNil(t *testing.T) {
	s := newSched(t, Options{})
	c := NewChan[int](0)
	var a, b int
	vt, _ := s.Go(func(context.Context) error {
		i, ok := Select(RecvCase(c, &a), RecvCase[int](nil, &b), RecvCase(c, &b), Case{})
		if !ok || (i != 0 && i != 2) {
			return fmt.Errorf("Select = %d, %v", i, ok)
		}
		if got := []int{a, b}[i/2]; got != 5 {
			return fmt.Errorf("case %d got %d", i, got)
		}
		return nil
	})
	waitQueued(t, c, 2, 0)
	c.Send(5)
	if err := vt.Join(); err != nil {
		t.Fatal(err)
	}
	if r, s := queued(c); r != 0 || s != 0 {
		t.Fatalf("%d receivers, %d senders left queued", r, s)
	}
	// A select with a send and a receive on one unbuffered channel does
	// not meet itself.
	if i, _ := SelectTimeout(5*time.Millisecond, SendCase(c, 1), RecvCase(c, &a)); i != -1 {
		t.Fatalf("a select met itself: case %d", i)
	}
	// Only nil cases: only the timeout can end it.
	if i, _ := SelectTimeout(time.Millisecond, RecvCase[int](nil, nil), SendCase[int](nil, 1)); i != -1 {
		t.Fatalf("nil cases: %d", i)
	}
}

func TestSelectSendCaseClosedWhileWaiting(t *testing.T) {
	s := newSched(t, Options{})
	c := NewChan[int](0)
	d := NewChan[int](0)
	vt, _ := s.Go(func(context.Context) error {
		Select(SendCase(c, 1), RecvCase(d, nil))
		return nil
	})
	waitQueued(t, c, 0, 1)
	c.Close()
	var pe *PanicError
	if err := vt.Join(); !errors.As(err, &pe) || pe.Value != errSendClosed {
		t.Fatalf("Join = %v", err)
	}
	if r, s := queued(d); r != 0 || s != 0 {
		t.Fatalf("d: %d receivers, %d senders left queued", r, s)
	}
}

// TestChanPingPong bounces messages between two virtual threads over one
// unbuffered channel: each message is a park and a wake-up.
func TestChanPingPong(t *testing.T) {
	n := iters(1_000_000, 100_000)
	s := newSched(t, Options{})
	ch := NewChan[int](0)
	start := time.Now()
	a, _ := s.Go(func(context.Context) error {
		for i := 0; i < n; i += 2 {
			ch.Send(i)
			if v, ok := ch.Recv(); v != i+1 || !ok {
				return fmt.Errorf("ping %d: got %d, %v", i, v, ok)
			}
		}
		return nil
	})
	b, _ := s.Go(func(context.Context) error {
		for i := 0; i < n; i += 2 {
			if v, ok := ch.Recv(); v != i || !ok {
				return fmt.Errorf("pong %d: got %d, %v", i, v, ok)
			}
			ch.Send(i + 1)
		}
		return nil
	})
	done := make(chan struct{})
	var errA, errB error
	go func() { errA, errB = a.Join(), b.Join(); close(done) }()
	if !waitDone(t, done, 120*time.Second, "ping-pong") {
		return
	}
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	el := time.Since(start)
	t.Logf("%d messages in %v: %v a message", n, el, el/time.Duration(n))
}

// detRun runs a producers/consumer program on a deterministic scheduler
// and returns what the consumer saw, with the virtual time.
func detRun(t *testing.T, seed uint64) []string {
	s := newSched(t, Options{Deterministic: true, Seed: seed})
	var trace []string
	root, _ := s.Go(func(context.Context) error {
		data := NewChan[string](2)
		ticks := NewChan[int](0)
		var wg WaitGroup
		for p := range 3 {
			wg.Go(s, func(context.Context) error {
				for k := range 4 {
					data.Send(fmt.Sprintf("p%d.%d", p, k))
					if k == 1 {
						Sleep(time.Duration(p+1) * time.Millisecond)
					}
				}
				return nil
			})
		}
		wg.Go(s, func(context.Context) error {
			for i := range 3 {
				Sleep(1500 * time.Microsecond)
				ticks.Send(i)
			}
			return nil
		})
		for got := 0; got < 12+3; {
			var v string
			var tick int
			i, _ := SelectTimeout(time.Hour, RecvCase(data, &v), RecvCase(ticks, &tick))
			at := s.Now().Sub(epoch)
			switch i {
			case 0:
				trace = append(trace, fmt.Sprintf("%s@%v", v, at))
			case 1:
				trace = append(trace, fmt.Sprintf("tick%d@%v", tick, at))
			default:
				return fmt.Errorf("timed out at %v", at)
			}
			got++
			// A slow consumer: the producers and the ticker pile up, so
			// several cases are often ready and the select's choice
			// shows in the trace.
			Sleep(700 * time.Microsecond)
		}
		wg.Wait()
		// The virtual clock jumps: an hour passes at once.
		if i, _ := SelectTimeout(time.Hour, RecvCase(data, nil)); i != -1 {
			return fmt.Errorf("SelectTimeout = %d", i)
		}
		trace = append(trace, fmt.Sprintf("end@%v", s.Now().Sub(epoch)))
		return nil
	})
	if err := root.Join(); err != nil {
		t.Fatal(err)
	}
	return trace
}

func TestChanDeterministic(t *testing.T) {
	start := time.Now()
	first := detRun(t, 1)
	if again := detRun(t, 1); !reflect.DeepEqual(first, again) {
		t.Fatalf("seed 1 twice:\n%v\n%v", first, again)
	}
	distinct := map[string]bool{}
	for seed := range uint64(10) {
		distinct[strings.Join(detRun(t, seed), " ")] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("10 seeds, one interleaving: %v", first)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("virtual hours took %v of real time", el)
	}
	t.Logf("seed 1: %v; %d interleavings from 10 seeds", first, len(distinct))
}

// A virtual thread reuses the node of its last blocking Send or Recv
// (keptNodeOf). The node is handed back the moment the operation's
// completer claims it, so the completer must not touch it after: here a
// sender blocked on a full buffer is resumed by the receiver that moves
// its value into the buffer, and at once sends the next value through the
// same node. Every value arrives once, in order, across channels of two
// element types (which replace the cached node) and through timed and
// context operations (which do not use it). Under -race, an access after
// the claim is reported.
func TestChanNodeReuse(t *testing.T) {
	s := newTest(t, Options{Carriers: 2})
	const n = 20000
	ints := NewChan[int](1)
	strs := NewChan[string](0)
	ctx := context.Background()
	producer, _ := s.Go(func(context.Context) error {
		for i := range n {
			switch i % 8 {
			case 3:
				strs.Send(fmt.Sprint(i))
			case 5:
				if !ints.SendTimeout(i, time.Minute) {
					return fmt.Errorf("SendTimeout of %d timed out", i)
				}
			case 6:
				if err := ints.SendContext(ctx, i); err != nil {
					return err
				}
			default:
				ints.Send(i)
			}
		}
		return nil
	})
	consumer, _ := s.Go(func(context.Context) (err error) {
		defer func() {
			if err != nil { // unblock the producer: its Send panics
				ints.Close()
				strs.Close()
			}
		}()
		for i := range n {
			var got string
			switch i % 8 {
			case 3:
				v, ok := strs.Recv()
				got = fmt.Sprintf("%v %v", v, ok)
				if want := fmt.Sprintf("%v %v", i, true); got != want {
					return fmt.Errorf("value %d: got %s", i, got)
				}
				continue
			case 4:
				v, ok, ready := ints.RecvTimeout(time.Minute)
				got = fmt.Sprint(v, ok, ready)
			default:
				v, ok := ints.Recv()
				got = fmt.Sprint(v, ok, true)
			}
			if want := fmt.Sprint(i, true, true); got != want {
				return fmt.Errorf("value %d: got %s", i, got)
			}
		}
		return nil
	})
	perr, cerr := producer.Join(), consumer.Join()
	if perr != nil || cerr != nil {
		t.Fatalf("producer: %v; consumer: %v", perr, cerr)
	}
}

// A cached node woken by Close, for a receive (ok false) and for a send
// (a panic the virtual thread recovers from), serves the next operation.
func TestChanNodeReuseAfterClose(t *testing.T) {
	s := newTest(t, Options{})
	for round := range 50 {
		a, b := NewChan[int](0), NewChan[int](0)
		vt, _ := s.Go(func(context.Context) error {
			if v, ok := a.Recv(); ok || v != 0 {
				return fmt.Errorf("Recv on closed: %d, %v", v, ok)
			}
			panicked := func() (p any) {
				defer func() { p = recover() }()
				b.Send(1)
				return nil
			}()
			if panicked != errSendClosed {
				return fmt.Errorf("Send on a Chan closed while waiting: %v", panicked)
			}
			c := NewChan[int](0)
			go func() { c.Send(round) }()
			if v, ok := c.Recv(); !ok || v != round {
				return fmt.Errorf("Recv after: %d, %v", v, ok)
			}
			return nil
		})
		waitQueued(t, a, 1, 0)
		a.Close()
		waitQueued(t, b, 0, 1)
		b.Close()
		if err := vt.Join(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// chanPinned blocks in a Send (send) or Recv on ch inside a critical
// section, so that its park is pinned and blocks its carrier; Pins name
// this function as the site.
//
//go:noinline
func chanPinned(ch *Chan[int], send bool) (got int) {
	pinning.Do(func() {
		if send {
			ch.Send(7)
		} else {
			got, _ = ch.Recv()
		}
	})
	return got
}

var chanPinnedSite = funcName(chanPinned)

// A Send or Recv that parks pinned (the channel's own park loop, not
// await's) blocks its carrier until the other side comes, delivers the
// value, and is counted at its site; meanwhile a compensation carrier runs
// the rest.
func TestChanPinnedPark(t *testing.T) {
	for _, send := range []bool{false, true} {
		t.Run(fmt.Sprintf("send=%v", send), func(t *testing.T) {
			s := boundedSched(t, Options{Carriers: 1})
			ch := NewChan[int](0)
			var got atomic.Int64
			vt := goOrFatal(t, s, func(ctx context.Context) error {
				got.Store(int64(chanPinned(ch, send)))
				return nil
			})
			waitUntil(t, "the carrier to block pinned", func() bool { return s.blocked.Load() == 1 })
			// The other side, from a virtual thread: only a compensation
			// carrier can run it.
			other := goOrFatal(t, s, func(ctx context.Context) error {
				if send {
					if v, ok := ch.Recv(); !ok || v != 7 {
						return fmt.Errorf("Recv = %d, %v; want 7, true", v, ok)
					}
				} else {
					ch.Send(9)
				}
				return nil
			})
			if err := joinWithin(t, other); err != nil {
				t.Fatal(err)
			}
			if err := joinWithin(t, vt); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int64{false: 9, true: 0}[send]; got.Load() != want {
				t.Fatalf("the pinned side got %d, want %d (9 from a Recv, 0 after a Send)", got.Load(), want)
			}
			if n := pinCount(s, chanPinnedSite); n != 1 {
				t.Fatalf("Pins() = %+v, want one CriticalSection pin at %s", s.Pins(), chanPinnedSite)
			}
		})
	}
}

// A Context operation that needs no waiting happens even if its context
// has ended already, as the doc comments say (a try comes first).
func TestChanContextEndedButReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := NewChan[int](1)
	if err := c.SendContext(ctx, 1); err != nil {
		t.Errorf("SendContext with room, ended ctx: %v, want the send", err)
	}
	if v, ok, err := c.RecvContext(ctx); err != nil || !ok || v != 1 {
		t.Errorf("RecvContext of a queued value, ended ctx = %d, %v, %v; want 1, true, nil", v, ok, err)
	}
	if _, _, err := c.RecvContext(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("RecvContext of an empty channel, ended ctx: %v, want context.Canceled", err)
	}
	var x int
	c.TrySend(2)
	if i, ok, err := SelectContext(ctx, RecvCase(c, &x)); i != 0 || !ok || err != nil || x != 2 {
		t.Errorf("SelectContext with a ready case, ended ctx = %d, %v, %v (x = %d); want 0, true, nil (2)", i, ok, err, x)
	}
}

// An Unpark that comes while a virtual thread waits in Recv is used up
// there (the wait looks again and parks on), as Park's doc comment says:
// the next Park would not see it.
func TestChanWaitUsesUpUnpark(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1})
	ch := NewChan[int](0)
	left := make(chan bool, 1)
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		v, ok := ch.Recv()
		left <- Current().permit.Load()
		if v != 7 || !ok {
			return fmt.Errorf("Recv = %d, %v; want 7, true", v, ok)
		}
		return nil
	})
	waitUntil(t, "the thread to park in Recv", func() bool { return vt.state.Load() == vtParked })
	vt.Unpark()
	waitUntil(t, "the Unpark to be used up, the thread parked again", func() bool {
		return !vt.permit.Load() && vt.state.Load() == vtParked
	})
	ch.Send(7)
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if <-left {
		t.Error("the permit of an Unpark that came during Recv is still set after it")
	}
}

// TestChanQueueOffNodesUnlinked pins what push relies on: a node that
// pop or remove takes off a queue has q, prev and next nil, so that
// pushing it again (a kept node, reused by its thread's next Send or
// Recv) links it only where push links it. Random pushes, pops and
// removes, with the queue checked against a model after each.
func TestChanQueueOffNodesUnlinked(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q chanQueue[int]
	nodes := make([]*chanNode[int], 8)
	for i := range nodes {
		nodes[i] = &chanNode[int]{val: i}
	}
	var model []*chanNode[int]
	off := func(n *chanNode[int]) {
		t.Helper()
		if n.q != nil || n.prev != nil || n.next != nil {
			t.Fatalf("node %d taken off: q %p, prev %p, next %p; want all nil", n.val, n.q, n.prev, n.next)
		}
	}
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(3); {
		case op == 0 && len(model) < len(nodes):
			var free []*chanNode[int]
			for _, n := range nodes {
				if n.q == nil {
					free = append(free, n)
				}
			}
			n := free[rng.IntN(len(free))]
			q.push(n)
			model = append(model, n)
		case op == 1:
			n := q.pop()
			if len(model) == 0 {
				if n != nil {
					t.Fatalf("pop of an empty queue gave node %d", n.val)
				}
				continue
			}
			if n != model[0] {
				t.Fatalf("pop gave node %d, want %d", n.val, model[0].val)
			}
			model = model[1:]
			off(n)
		case op == 2 && len(model) > 0:
			i := rng.IntN(len(model))
			n := model[i]
			q.remove(n)
			model = append(model[:i:i], model[i+1:]...)
			off(n)
		}
		var prev *chanNode[int]
		i := 0
		for n := q.head; n != nil; n = n.next {
			if i >= len(model) || n != model[i] || n.prev != prev || n.q != &q {
				t.Fatalf("step %d: queue differs from the model at %d", step, i)
			}
			prev, i = n, i+1
		}
		if i != len(model) || q.tail != prev {
			t.Fatalf("step %d: queue has %d nodes (tail %p), model %d", step, i, q.tail, len(model))
		}
	}
}

// TestChanConservation: producers send unique values with every
// kind of send over three channels (unbuffered, buffered, zero Chan);
// consumers receive with every kind of receive; then the channels close
// and the consumers drain them. A value whose send reported success is
// received exactly once; one whose send reported failure never is; no
// waiter stays queued.
func TestChanConservation(t *testing.T) {
	for _, det := range []bool{false, true} {
		t.Run(fmt.Sprint("det=", det), func(t *testing.T) {
			s := newSched(t, Options{Deterministic: det, Seed: 7, Carriers: 2})
			var zc Chan[int]
			chans := []*Chan[int]{NewChan[int](0), NewChan[int](2), &zc}
			const producers, consumers = 6, 6
			per := iters(3000, 400)
			total := producers * per
			sent := make([]atomic.Int32, total)
			got := make([]atomic.Int32, total)
			var closedSeen atomic.Int32
			var pwg sync.WaitGroup
			produce := func(p int) {
				defer pwg.Done()
				for k := range per {
					v := p*per + k
					c := chans[(p+k)%3]
					ok := false
					switch k % 6 {
					case 0:
						c.Send(v)
						ok = true
					case 1:
						ok = c.TrySend(v)
					case 2:
						ok = c.SendTimeout(v, time.Duration(k%7)*time.Microsecond)
					case 3:
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(k%5)*time.Microsecond)
						ok = c.SendContext(ctx, v) == nil
						cancel()
					case 4:
						i, _ := SelectTimeout(time.Duration(k%9)*time.Microsecond, SendCase(c, v), SendCase(chans[(p+k+1)%3], v), RecvCase[int](nil, nil))
						ok = i >= 0
					case 5:
						i, _ := TrySelect(SendCase(c, v), SendCase(chans[(p+k+2)%3], v))
						ok = i >= 0
					}
					if ok {
						sent[v].Add(1)
					}
				}
			}
			var cwg sync.WaitGroup
			consume := func(c0 int) {
				defer cwg.Done()
				var vs [3]int
				open := [3]bool{true, true, true}
				for k := 0; open[0] || open[1] || open[2]; k++ {
					c := c0 + k
					j := c % 3
					var v int
					var ok, ready bool
					switch c % 5 {
					case 0:
						if !open[j] {
							continue
						}
						v, ok, ready = chans[j].RecvTimeout(time.Duration(k%11) * time.Microsecond)
					case 1:
						if !open[j] {
							continue
						}
						v, ok, ready = chans[j].TryRecv()
					case 2:
						if !open[j] {
							continue
						}
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(k%13)*time.Microsecond)
						var err error
						v, ok, err = chans[j].RecvContext(ctx)
						ready = err == nil
						cancel()
					default:
						var cs [3]Case
						for i := range 3 {
							if open[i] {
								cs[i] = RecvCase(chans[i], &vs[i])
							}
						}
						var i int
						i, ok = SelectTimeout(time.Duration(1+k%17)*time.Microsecond, cs[:]...)
						if i >= 0 {
							j, v, ready = i, vs[i], true
						}
					}
					if !ready {
						continue
					}
					if !ok {
						if v != 0 {
							t.Errorf("closed receive gave %d", v)
						}
						open[j] = false
						closedSeen.Add(1)
						continue
					}
					got[v].Add(1)
				}
			}
			pwg.Add(producers)
			cwg.Add(consumers)
			for i := range producers {
				if i%2 == 0 {
					s.Go(func(context.Context) error { produce(i); return nil })
					go consume(i)
				} else {
					go produce(i)
					s.Go(func(context.Context) error { consume(i); return nil })
				}
			}
			pdone := make(chan struct{})
			go func() { pwg.Wait(); close(pdone) }()
			if !waitDone(t, pdone, 60*time.Second, "producers") {
				return
			}
			for _, c := range chans {
				c.Close()
			}
			cdone := make(chan struct{})
			go func() { cwg.Wait(); close(cdone) }()
			if !waitDone(t, cdone, 60*time.Second, "consumers") {
				return
			}
			nsent := 0
			for v := range total {
				sn, gn := sent[v].Load(), got[v].Load()
				if sn != gn {
					t.Errorf("value %d: send reported %d, received %d times", v, sn, gn)
				}
				nsent += int(sn)
			}
			for i, c := range chans {
				if r, sd := queued(c); r != 0 || sd != 0 {
					t.Errorf("chan %d: %d receivers, %d senders still queued", i, r, sd)
				}
			}
			t.Logf("%d of %d sent", nsent, total)
		})
	}
}
