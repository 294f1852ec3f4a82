package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weftrt/weft/pinning"
	"github.com/weftrt/weft/scheduler"
)

// A tracking scheduler lists its virtual threads with their state and the
// stack of each parked one.
func ExampleScheduler_Threads() {
	s, err := scheduler.New(scheduler.Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		panic(err)
	}
	var wg scheduler.WaitGroup
	wg.Add(1)
	vt, _ := s.GoNamed("waiter", func(context.Context) error {
		wg.Wait()
		return nil
	})
	for info, _ := s.Thread(vt.ID()); info.State != scheduler.Parked || len(info.Stack) == 0; info, _ = s.Thread(vt.ID()) {
		time.Sleep(time.Millisecond) // until it has parked
	}
	for info := range s.Threads() {
		fmt.Println(info.Name, info.State, info.Stack[2].Function)
	}
	fmt.Println(s.State().Live, "live")
	wg.Done()
	s.Close()
	// Output:
	// waiter parked github.com/weftrt/weft/scheduler.(*WaitGroup).Wait
	// 1 live
}

// The pinning profile records where parks blocked their carrier, why and
// for how long: here a park inside pinning.Do, with a threshold of 0 so
// that it is recorded however short it is.
func ExampleScheduler_PinProfile() {
	s, err := scheduler.New(scheduler.Options{Carriers: 1})
	if err != nil {
		panic(err)
	}
	s.SetPinThreshold(0)
	vt, _ := s.Go(func(context.Context) error {
		pinning.Do(scheduler.Park) // cannot suspend: blocks the carrier
		return nil
	})
	for s.State().Blocked == 0 {
		time.Sleep(time.Millisecond) // until it has blocked
	}
	vt.Unpark()
	vt.Join()
	for _, r := range s.PinProfile() {
		fmt.Println(r.Reason, r.Count, r.Park, r.Nanos > 0)
	}
	s.Close()
	// Output:
	// critical section (pinning.Do) 1 true true
}
