package scheduler

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrt/weft"
)

// heldFor is how long each holder below holds its carrier at least.
const heldFor = time.Second

// The holders: each keeps its carrier, without parking, until released.
func holdBySleep(release *atomic.Bool) {
	// One long sleep first: the monitor's look finds it asleep, and not
	// between two sleeps.
	time.Sleep(heldFor)
	for !release.Load() {
		time.Sleep(20 * time.Millisecond)
	}
}

func holdByChannel(ch chan struct{}) { <-ch }

func holdByMutex(mu *sync.Mutex) {
	mu.Lock()
	mu.Unlock()
}

func holdByPipe(r *os.File) {
	var b [1]byte
	r.Read(b[:])
}

func holdByComputing(release *atomic.Bool) (n int) {
	for !release.Load() {
		n += time.Now().Nanosecond() & 1 // a call: preemptible, and inside the standard library
	}
	return n
}

// A holder: hold keeps the calling virtual thread's carrier until
// release is called; site is the function Held must report.
type holder struct {
	name      string
	site      string
	computing bool
	hold      func()
	release   func()
}

func holders(t *testing.T) []holder {
	var sleepDone, spinDone atomic.Bool
	ch := make(chan struct{})
	var mu sync.Mutex
	locked := make(chan struct{})
	unlock := make(chan struct{})
	go func() { // a goroutine holds mu until released
		mu.Lock()
		close(locked)
		<-unlock
		mu.Unlock()
	}()
	<-locked
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return []holder{
		{"sleep", funcName(holdBySleep), false, func() { holdBySleep(&sleepDone) }, func() { sleepDone.Store(true) }},
		{"channel", funcName(holdByChannel), false, func() { holdByChannel(ch) }, func() { close(ch) }},
		{"mutex", funcName(holdByMutex), false, func() { holdByMutex(&mu) }, func() { close(unlock) }},
		{"pipe", funcName(holdByPipe), false, func() { holdByPipe(r) }, func() { w.Write([]byte{1}) }},
		{"computing", funcName(holdByComputing), true, func() { holdByComputing(&spinDone) }, func() { spinDone.Store(true) }},
	}
}

// pingPong starts two virtual threads that pass a value back and forth
// n times over Chans, from a virtual thread: they queue on its carrier.
func pingPong(s *Scheduler, n int) (a, b *VThread, err error) {
	ab, ba := NewChan[int](0), NewChan[int](0)
	if a, err = s.Go(func(ctx context.Context) error {
		for i := range n {
			ab.Send(i)
			ba.Recv()
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	b, err = s.Go(func(ctx context.Context) error {
		for range n {
			v, _ := ab.Recv()
			ba.Send(v)
		}
		return nil
	})
	return a, b, err
}

// TestHeldCarrier: on one carrier, a virtual thread holds it for a second
// or more without parking: asleep, on a Go channel, on a sync.Mutex a
// goroutine holds, reading an os.Pipe, or computing. Two virtual threads
// it queued on that carrier complete a 1,000-message ping-pong before it
// lets go (the monitor finds the carrier held and starts a compensation
// carrier, which steals them), and Held reports the hold with the
// holder's function, whether it computed, and its end.
func TestHeldCarrier(t *testing.T) {
	for _, h := range holders(t) {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			s := boundedSched(t, Options{Carriers: 1})
			var a, b *VThread
			queued := make(chan struct{})
			var pingDoneFirst atomic.Bool
			holdStart := time.Now()
			holderVT := goOrFatal(t, s, func(ctx context.Context) error {
				var err error
				if a, b, err = pingPong(s, 1000); err != nil {
					return err
				}
				close(queued)
				h.hold()
				return nil
			})
			<-queued
			giveUp := time.After(fairnessGiveUp)
			for _, vt := range []*VThread{a, b} {
				select {
				case <-vt.Done():
				case <-giveUp:
				}
			}
			pingDoneFirst.Store(a.finished() && b.finished())
			time.Sleep(time.Until(holdStart.Add(heldFor)))
			h.release()
			if err := joinWithin(t, holderVT); err != nil {
				t.Fatal(err)
			}
			joinWithin(t, a)
			joinWithin(t, b)
			if !pingDoneFirst.Load() {
				t.Fatalf("the ping-pong on the held carrier finished only after the holder let go (gave up after %v)", fairnessGiveUp)
			}
			waitUntil(t, "the hold's release to be recorded", func() bool {
				e := s.Held()
				return len(e) > 0 && e[len(e)-1].Released
			})
			events := s.Held()
			if len(events) != 1 {
				t.Fatalf("Held() = %d events, want 1: %+v", len(events), events)
			}
			e := events[0]
			if e.Reason != HeldCarrier || e.Function != h.site || e.Computing != h.computing || e.Duration <= 0 {
				t.Errorf("Held()[0] = {Reason %q, Function %q, Computing %v, Wait %q, Duration %v}, want {%q, %q, %v, a duration}\n%s",
					e.Reason, e.Function, e.Computing, e.Wait, e.Duration, HeldCarrier, h.site, h.computing, e.Stack)
			}
			if !strings.Contains(e.Stack, h.site) {
				t.Errorf("the event's stack does not name %s:\n%s", h.site, e.Stack)
			}
			waitUntil(t, "the compensation carrier to retire", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.temp == 0
			})
		})
	}
}

// TestHeldCarrierBound: with MaxCompensation negative, a held carrier is
// recorded but gets no compensation carrier, and what is queued on it
// waits for the holder to let go.
func TestHeldCarrierBound(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1, MaxCompensation: -1})
	release, queued := make(chan struct{}), make(chan struct{})
	var a, b *VThread
	holderVT := goOrFatal(t, s, func(ctx context.Context) error {
		var err error
		if a, b, err = pingPong(s, 10); err != nil {
			return err
		}
		close(queued)
		holdByChannel(release)
		return nil
	})
	<-queued
	waitUntil(t, "the hold to be recorded", func() bool { return len(s.Held()) == 1 })
	s.mu.Lock()
	temp := s.temp
	s.mu.Unlock()
	if temp != 0 || a.finished() || b.finished() {
		t.Errorf("with MaxCompensation -1: %d compensation carriers, ping-pong finished %v, %v; want none, and not", temp, a.finished(), b.finished())
	}
	close(release)
	joinWithin(t, holderVT)
	joinWithin(t, a)
	joinWithin(t, b)
	if e := s.Held(); len(e) != 1 || e[0].Function != funcName(holdByChannel) {
		t.Errorf("Held() = %+v, want one event at %s", e, funcName(holdByChannel))
	}
}

// TestBlocking: a virtual thread that blocks inside Blocking lets the
// other threads of its only carrier run at once, and is not recorded as
// a held carrier (it compensated itself).
func TestBlocking(t *testing.T) {
	s := boundedSched(t, Options{Carriers: 1})
	var a, b *VThread
	release := make(chan struct{})
	queued := make(chan struct{})
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		var err error
		if a, b, err = pingPong(s, 1000); err != nil {
			return err
		}
		close(queued)
		Blocking(func() { <-release })
		return nil
	})
	<-queued
	joinWithin(t, a)
	joinWithin(t, b)
	close(release)
	joinWithin(t, vt)
	if e := s.Held(); len(e) != 0 {
		t.Errorf("Held() = %+v, want none: Blocking compensates", e)
	}
	waitUntil(t, "the compensation carrier to retire", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.temp == 0
	})
}

// TestBlockingOutside: Blocking from a plain goroutine, or in
// deterministic mode, just runs its function.
func TestBlockingOutside(t *testing.T) {
	ran := false
	Blocking(func() { ran = true })
	if !ran {
		t.Error("Blocking from a goroutine did not run its function")
	}
	s := boundedSched(t, Options{Deterministic: true})
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		Blocking(func() { ran = false })
		return nil
	})
	joinWithin(t, vt)
	if ran {
		t.Error("Blocking in deterministic mode did not run its function")
	}
}

// TestSiteFunction: the site of a traceback is its innermost function
// outside the standard library and weft's engine.
func TestSiteFunction(t *testing.T) {
	stack := `goroutine 16 [sleep, locked to thread]:
time.Sleep(0x11e1a300)
	/usr/lib/go/src/runtime/time.go:363 +0x165
main.work(...)
	/src/main.go:10
github.com/weftrt/weft/scheduler.vthreadBody()
	/src/scheduler/vthread.go:1 +0x1
github.com/weftrt/weft.(*Cont).Run(...)
created by github.com/weftrt/weft/scheduler.New in goroutine 14`
	if got := siteFunction(stack); got != "main.work" {
		t.Errorf("siteFunction = %q, want main.work", got)
	}
	if got := goroutineWait(stack); got != "sleep" {
		t.Errorf("goroutineWait = %q, want sleep", got)
	}
	for name, want := range map[string]bool{
		"internal/poll.(*FD).Read":                  true,
		"sync.(*Mutex).Lock":                        true,
		"github.com/weftrt/weft.(*Cont).Run":        true,
		"github.com/weftrt/weft/internal/rt.f":      true,
		"github.com/weftrt/weft/scheduler.Blocking": false,
		"example.com/x.f":                           false,
		"main.main":                                 false,
	} {
		if got := isEngineOrStd(name); got != want {
			t.Errorf("isEngineOrStd(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestHeldStack: heldStack finds the held thread's traceback on either
// backend's layout, and no hold where the carrier is outside a thread.
func TestHeldStack(t *testing.T) {
	const (
		other = "goroutine 1 [chan receive]:\nmain.main()\n\t/src/main.go:5 +0x1"
		// Stack-copying: the thread's frames on the carrier's goroutine.
		stackCopying = "goroutine 7 [sleep, locked to thread]:\ntime.Sleep(0x1)\nmain.hold(...)\n" +
			"github.com/weftrt/weft/scheduler.vthreadBody()\ngithub.com/weftrt/weft.(*Cont).Run(...)\n" +
			"github.com/weftrt/weft/scheduler.(*carrier).run(0x1, 0x2)\ngithub.com/weftrt/weft/scheduler.(*carrier).loop(0x1)"
		// Outside the thread's frames, in run.
		inRun = "goroutine 7 [runnable, locked to thread]:\nruntime.profLabel()\n" +
			"github.com/weftrt/weft/scheduler.(*carrier).run(0x1, 0x2)\ngithub.com/weftrt/weft/scheduler.(*carrier).loop(0x1)"
		idle = "goroutine 7 [chan receive]:\ngithub.com/weftrt/weft/scheduler.(*carrier).sleep(0x1)\n" +
			"github.com/weftrt/weft/scheduler.(*carrier).loop(0x1)"
		// Portable: the carrier switched into a body goroutine.
		portableCarrier = "goroutine 7 [coroutine]:\niter.Pull[...].func2()\ngithub.com/weftrt/weft.(*Cont).Run(...)\n" +
			"github.com/weftrt/weft/scheduler.(*carrier).run(0x1, 0x2)\ngithub.com/weftrt/weft/scheduler.(*carrier).loop(0x1)"
		body = "goroutine 20 [IO wait]:\ninternal/poll.(*FD).Read(0x1)\nmain.read(...)\n" +
			"github.com/weftrt/weft/scheduler.vthreadBody()\niter.Pull[...].func1()\ncreated by iter.Pull[...] in goroutine 7"
		otherBody = "goroutine 21 [running]:\nmain.spin()\n" +
			"github.com/weftrt/weft/scheduler.vthreadBody()\niter.Pull[...].func1()\ncreated by iter.Pull[...] in goroutine 8"
		parkedBody = "goroutine 22 [coroutine]:\niter.Pull[...].func1()\n" +
			"github.com/weftrt/weft/scheduler.vthreadBody()\ncreated by iter.Pull[...] in goroutine 7"
	)
	for _, tc := range []struct {
		name      string
		dump      string
		wantStack string
		wantOK    bool
	}{
		{"stack-copying", other + "\n\n" + stackCopying, stackCopying, true},
		{"in run, outside the thread", other + "\n\n" + inRun, "", false},
		{"idle", other + "\n\n" + idle, "", false},
		{"portable, one body", portableCarrier + "\n\n" + parkedBody + "\n\n" + body, body, true},
		{"portable, the body the carrier made", portableCarrier + "\n\n" + otherBody + "\n\n" + body, body, true},
		{"portable, no body found", portableCarrier + "\n\n" + parkedBody, "", true},
		{"no carrier", other, "", false},
	} {
		stack, ok := heldStack(tc.dump, 7)
		if stack != tc.wantStack || ok != tc.wantOK {
			t.Errorf("%s: heldStack = %q, %v; want %q, %v", tc.name, stack, ok, tc.wantStack, tc.wantOK)
		}
	}
	if f := siteFunction(body); f != "main.read" {
		t.Errorf("siteFunction(portable body) = %q, want main.read", f)
	}
}

// The frame names the monitor looks for are those a traceback prints: a
// thread's own stack shows vthreadBody, and, on the stack-copying backend
// where the thread runs on its carrier's goroutine, the carrier's run.
func TestHeldFrameNames(t *testing.T) {
	for name, want := range map[string]string{
		runFrame:     "/scheduler.(*carrier).run(",
		bodyFrame:    "/scheduler.vthreadBody(",
		outsideFrame: "/scheduler.(*Scheduler).runOutside(",
	} {
		if !strings.HasSuffix(name, want) {
			t.Errorf("frame name %q, want one ending in %q", name, want)
		}
	}
	s := newSched(t, Options{Carriers: 1})
	var stack string
	vt := goOrFatal(t, s, func(ctx context.Context) error {
		buf := make([]byte, 64<<10)
		stack = string(buf[:runtime.Stack(buf, false)])
		return nil
	})
	if err := joinWithin(t, vt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stack, bodyFrame) {
		t.Errorf("a thread's traceback does not name %q:\n%s", bodyFrame, stack)
	}
	if weft.ActiveBackend() == weft.StackCopying && !strings.Contains(stack, runFrame) && !strings.Contains(stack, outsideFrame) {
		t.Errorf("a thread's traceback names neither %q nor %q:\n%s", runFrame, outsideFrame, stack)
	}
}
