package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftrt/weft/scheduler"
	"github.com/weftrt/weft/vtprof"
)

// profiled shows virtual threads as profilers see them: a dump of a
// tracking scheduler's threads, parked a few frames deep, and a CPU
// profile of one computing under a yield loop, written to a file with its
// whole stacks.
func profiled(w io.Writer) error {
	fmt.Fprintln(w, "3. virtual threads, as go tool pprof sees them (package vtprof)")
	s, err := scheduler.New(scheduler.Options{Carriers: 2, TrackThreads: true})
	if err != nil {
		return err
	}
	defer s.Close()
	var stop atomic.Bool
	var inbox scheduler.WaitGroup
	inbox.Add(1)
	waiter, _ := s.GoNamed("mailbox", func(context.Context) error { return receive(&inbox) })
	worker, _ := s.GoNamed("worker", func(context.Context) error { crunch(12, &stop); return nil })
	for {
		info, ok := s.Thread(waiter.ID())
		if ok && info.State == scheduler.Parked && len(info.Stack) > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var dump bytes.Buffer
	if err := vtprof.WriteThreads(&dump, s, 2); err != nil {
		return err
	}
	fmt.Fprintln(w, "   the thread dump (debug=2), the mailbox thread's block:")
	for _, block := range strings.Split(dump.String(), "\n\n") {
		if strings.Contains(block, `"mailbox"`) {
			for _, line := range strings.Split(block, "\n") {
				fmt.Fprintln(w, "     ", line)
			}
		}
	}
	path := filepath.Join(os.TempDir(), "weft-cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = vtprof.CPUProfile(context.Background(), f, 300*time.Millisecond)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	stop.Store(true)
	inbox.Done()
	if err := worker.Join(); err != nil {
		return err
	}
	if err := waiter.Join(); err != nil {
		return err
	}
	fmt.Fprintf(w, "   a CPU profile of the worker, 13 frames deep, with whole stacks: %s\n", path)
	fmt.Fprintf(w, "   open it with: go tool pprof -http=: %s  (or -traces, -svg)\n", path)
	fmt.Fprintln(w, "   serve them all: http.Handle(\"/debug/vthreads/\", http.StripPrefix(\"/debug/vthreads\", vtprof.Handler(s)))")
	return nil
}

// receive waits for a message: the mailbox thread parks here.
//
//go:noinline
func receive(inbox *scheduler.WaitGroup) error {
	inbox.Wait()
	return nil
}

// crunch recurses n frames deep and computes there, yielding between
// rounds, until stop is set.
//
//go:noinline
func crunch(n int, stop *atomic.Bool) int {
	if n == 0 {
		x := 0
		for !stop.Load() {
			for i := range 1_000_000 {
				x += i ^ x
			}
			scheduler.Yield()
		}
		return x
	}
	return crunch(n-1, stop) + 1
}
