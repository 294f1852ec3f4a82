package vtprof_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/continuation"
	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/scope"
	"github.com/weftrt/weft/vtprof"
)

// A dump of a tracking scheduler's virtual threads, one block per thread
// (debug=2), as the goroutine profile prints goroutines.
func ExampleWriteThreads() {
	s, err := scheduler.New(scheduler.Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		log.Fatal(err)
	}
	parked := make(chan struct{})
	vt, _ := s.GoNamed("worker", func(context.Context) error {
		close(parked)
		scheduler.Park()
		return nil
	})
	<-parked
	for info, _ := s.Thread(vt.ID()); info.State != scheduler.Parked || len(info.Stack) == 0; info, _ = s.Thread(vt.ID()) {
		time.Sleep(time.Millisecond) // until it has parked
	}
	var buf bytes.Buffer
	if err := vtprof.WriteThreads(&buf, s, 2); err != nil {
		log.Fatal(err)
	}
	// The first line, less the time parked; then the innermost frame.
	lines := strings.Split(buf.String(), "\n")
	fmt.Println(strings.SplitN(lines[0], ",", 2)[0])
	fmt.Println(lines[1])
	vt.Unpark()
	s.Close()
	// Output:
	// vthread 1 "worker" [parked
	// github.com/weftrt/weft/scheduler.Park(...)
}

// Serving the profiles next to net/http/pprof's, under /debug/vthreads/:
// go tool pprof http://localhost:6060/debug/vthreads/threads reads the
// dump, and .../profile?seconds=10 a CPU profile with whole stacks.
func ExampleHandler() {
	s, err := scheduler.New(scheduler.Options{TrackThreads: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	http.Handle("/debug/vthreads/", http.StripPrefix("/debug/vthreads", vtprof.Handler(s)))
	// log.Fatal(http.ListenAndServe("localhost:6060", nil))
}

// A CPU profile in which virtual threads' samples have their whole stacks.
func ExampleStartCPUProfile() {
	var buf bytes.Buffer // a file, usually
	if err := vtprof.StartCPUProfile(&buf); err != nil {
		log.Fatal(err)
	}
	// ... run the virtual threads to profile ...
	if err := vtprof.StopCPUProfile(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(buf.Len() > 0)
	// Output: true
}

// A dump of continuations that a program keeps suspended itself, here a
// pool of two bodies suspended at the same Yield: debug=1 aggregates them
// in one record of two.
func ExampleWriteContinuations() {
	sc := scope.New("pool")
	pool := map[string]*continuation.Continuation{}
	for _, name := range []string{"a", "b"} {
		c := continuation.New(sc, func() { continuation.Yield(sc) })
		c.Run() // suspended in its Yield
		pool[name] = c
	}
	var buf bytes.Buffer
	if err := vtprof.WriteContinuations(&buf, maps.All(pool), 1); err != nil {
		log.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	fmt.Println(lines[0])
	fn, _, _ := strings.Cut(strings.Fields(lines[3])[2], "+") // less the offset
	fmt.Println(strings.Fields(lines[1])[0], "suspended in", fn)
	for _, c := range pool {
		c.Run() // returns from Yield, and the body ends
	}
	// Output:
	// continuation profile: total 2
	// 2 suspended in github.com/weftrt/weft/vtprof_test.ExampleWriteContinuations.func1
}

// The freeze/thaw profile of a yield loop: one call chain, with a capture
// and a thaw per round trip.
func ExampleWriteFreezeProfile() {
	weft.SetFreezeProfileRate(1) // every freeze and thaw
	defer weft.SetFreezeProfileRate(0)
	sc := scope.New("loop")
	c := continuation.New(sc, func() {
		for range 3 {
			continuation.Yield(sc)
		}
	})
	for !c.IsDone() {
		c.Run()
	}
	var buf bytes.Buffer
	if err := vtprof.WriteFreezeProfile(&buf, 1); err != nil {
		log.Fatal(err)
	}
	// The header, and the loop's record: its values line (captures
	// first, thaws fifth) comes before its frames.
	lines := strings.Split(buf.String(), "\n")
	fmt.Println(lines[0])
	values := ""
	for _, line := range lines[1:] {
		if strings.Contains(line, " @ ") {
			values = line
		} else if strings.Contains(line, "ExampleWriteFreezeProfile.func1") {
			v := strings.Fields(values)
			fmt.Println("captures", v[0], "thaws", v[4])
			break
		}
	}
	// Output:
	// --- freeze:
	// captures 3 thaws 3
}
