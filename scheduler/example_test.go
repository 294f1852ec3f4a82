package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weftrt/weft/scheduler"
)

// A counter shared by virtual threads and a plain goroutine. A virtual
// thread that finds the Mutex locked parks; its carrier runs others.
func ExampleMutex() {
	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	var mu scheduler.Mutex
	var wg scheduler.WaitGroup
	counter := 0
	for range 100 {
		wg.Go(s, func(context.Context) error {
			for range 100 {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			return nil
		})
	}
	wg.Add(1)
	go func() { // a plain goroutine blocks instead of parking
		defer wg.Done()
		mu.Lock()
		counter += 1000
		mu.Unlock()
	}()
	wg.Wait()
	fmt.Println(counter)
	// Output: 11000
}

// A pipeline of virtual threads connected by channels.
func ExampleChan() {
	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	nums := scheduler.NewChan[int](0) // unbuffered: a rendezvous
	squares := scheduler.NewChan[int](4)
	s.Go(func(context.Context) error {
		for i := 1; i <= 5; i++ {
			nums.Send(i)
		}
		nums.Close()
		return nil
	})
	s.Go(func(context.Context) error {
		for {
			n, ok := nums.Recv()
			if !ok {
				break // closed and drained
			}
			squares.Send(n * n)
		}
		squares.Close()
		return nil
	})
	for v, ok := squares.Recv(); ok; v, ok = squares.Recv() {
		fmt.Print(v, " ")
	}
	fmt.Println()
	// Output: 1 4 9 16 25
}

// All ranges over a channel's values until it is closed, in a virtual
// thread (which parks while it waits) or a goroutine (which blocks).
func ExampleChan_All() {
	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	words := scheduler.NewChan[string](0)
	s.Go(func(context.Context) error {
		for _, w := range strings.Fields("virtual threads range too") {
			words.Send(w)
		}
		words.Close()
		return nil
	})
	for w := range words.All() {
		fmt.Print(strings.ToUpper(w), " ")
	}
	fmt.Println()
	// Output: VIRTUAL THREADS RANGE TOO
}

// Select waits on several channels, with send and receive cases, and
// SelectTimeout gives up after a while.
func ExampleSelect() {
	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	words := scheduler.NewChan[string](0)
	numbers := scheduler.NewChan[int](0)
	acks := scheduler.NewChan[string](1)
	s.Go(func(context.Context) error {
		words.Send("hello")
		numbers.Send(42)
		return nil
	})
	vt, _ := s.Go(func(context.Context) error {
		var w string
		var n int
		for range 2 {
			switch i, _ := scheduler.Select(
				scheduler.RecvCase(words, &w),
				scheduler.RecvCase(numbers, &n),
			); i {
			case 0:
				fmt.Println("word:", w)
			case 1:
				fmt.Println("number:", n)
			}
		}
		// A send case: acks has room for one value.
		if i, _ := scheduler.Select(scheduler.SendCase(acks, "done")); i == 0 {
			fmt.Println("sent ack")
		}
		// Nothing more comes: time out (by the scheduler's clock).
		if i, _ := scheduler.SelectTimeout(10*time.Millisecond, scheduler.RecvCase(words, &w)); i == -1 {
			fmt.Println("timed out")
		}
		// With a default: TrySelect does not wait.
		if i, _ := scheduler.TrySelect(scheduler.SendCase(acks, "again")); i == -1 {
			fmt.Println("acks is full")
		}
		return nil
	})
	vt.Join()
	// Output:
	// word: hello
	// number: 42
	// sent ack
	// timed out
	// acks is full
}

type requestIDKey struct{}

// A virtual thread's context carries its parent's values and the virtual
// thread itself, which code handed only the context can find.
func ExampleFromContext() {
	s, err := scheduler.New(scheduler.Options{
		Context: context.WithValue(context.Background(), requestIDKey{}, "req-42"),
	})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	handle := func(ctx context.Context) {
		vt := scheduler.FromContext(ctx)
		fmt.Println(vt.Name(), ctx.Value(requestIDKey{}))
	}
	vt, err := s.GoNamed("worker", func(ctx context.Context) error {
		handle(ctx)
		return nil
	})
	if err != nil {
		panic(err)
	}
	vt.Join()
	fmt.Println(scheduler.FromContext(context.Background()) == nil)
	// Output:
	// worker req-42
	// true
}

// SleepContext is a Sleep that a context can end. In deterministic mode
// it sleeps on the virtual clock: a thread cancels the sleeper's context
// after 90 virtual seconds, and the hour-long sleep ends then. Close
// cancels every virtual thread's context, so a thread sleeping on its own
// does not keep Close waiting for the rest of its sleep, as one in Sleep
// would.
func ExampleSleepContext() {
	sim, err := scheduler.New(scheduler.Options{Deterministic: true, Seed: 1})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	start := sim.Now()
	sleeper, _ := sim.Go(func(context.Context) error {
		// Started by a virtual thread, not by this goroutine: the clock
		// cannot jump the hour before the canceller has started.
		sim.Go(func(context.Context) error {
			scheduler.Sleep(90 * time.Second)
			cancel()
			return nil
		})
		return scheduler.SleepContext(ctx, time.Hour)
	})
	fmt.Println(sleeper.Join(), "after", sim.Now().Sub(start))
	sim.Close()

	s, err := scheduler.New(scheduler.Options{})
	if err != nil {
		panic(err)
	}
	vt, _ := s.Go(func(ctx context.Context) error {
		return scheduler.SleepContext(ctx, time.Hour) // ctx ends with Close
	})
	s.Close()
	fmt.Println(vt.Join())
	// Output:
	// context canceled after 1m30s
	// context canceled
}

// A virtual thread about to block where the scheduler cannot see (here a
// plain Go channel, as for a system call or a cgo call) says so with
// Blocking: a compensation carrier runs the other virtual threads of its
// only carrier meanwhile, at once rather than once the monitor finds the
// carrier held.
func ExampleBlocking() {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	ready := make(chan string)
	waiter, _ := s.Go(func(context.Context) error {
		scheduler.Blocking(func() { fmt.Println(<-ready) })
		return nil
	})
	sender, _ := s.Go(func(context.Context) error {
		ready <- "sent by the other virtual thread"
		return nil
	})
	sender.Join()
	waiter.Join()
	fmt.Println(len(s.Held()), "held carriers")
	// Output:
	// sent by the other virtual thread
	// 0 held carriers
}
