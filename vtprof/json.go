package vtprof

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/weftrt/weft/scheduler"
)

// ThreadDumpSchema is the JSON Schema of WriteThreadsJSON's output,
// threaddump.schema.json.
//
//go:embed threaddump.schema.json
var ThreadDumpSchema []byte

// The JSON dump, in the shape of jcmd's Thread.dump_to_file: the scheduler
// is the root thread container and each Group a container under it.
type jsonDump struct {
	ThreadDump jsonThreadDump `json:"threadDump"`
}

type jsonThreadDump struct {
	ProcessID        string          `json:"processId"`
	Time             string          `json:"time"`
	RuntimeVersion   string          `json:"runtimeVersion"`
	Tracking         bool            `json:"tracking"`
	Live             int             `json:"live"`
	ThreadContainers []jsonContainer `json:"threadContainers"`
}

type jsonContainer struct {
	Container   string       `json:"container"`
	Parent      *string      `json:"parent"`
	Owner       *string      `json:"owner"`
	Threads     []jsonThread `json:"threads"`
	ThreadCount string       `json:"threadCount"`
}

type jsonThread struct {
	TID         string            `json:"tid"`
	Name        string            `json:"name"`
	State       string            `json:"state"`
	Carrier     *int              `json:"carrier"`
	ParkedSince *string           `json:"parkedSince"`
	Labels      map[string]string `json:"labels"`
	Stack       []string          `json:"stack"`
	CreatedBy   []string          `json:"createdBy"`
}

// WriteThreadsJSON writes a dump of s's virtual threads to w as JSON in
// the shape of jcmd's Thread.dump_to_file (threaddump.schema.json): the
// scheduler is the root thread container, named "scheduler", and each
// Group with live threads is a container "group-N" whose parent it is.
// Every thread has its ID (tid, a string as in jcmd), name, state,
// carrier, parked time, labels, stack and creation stack. A scheduler
// that does not track its threads gives empty containers and the live
// count.
func WriteThreadsJSON(w io.Writer, s *scheduler.Scheduler) error {
	threads := s.Threads()
	root := "scheduler"
	d := jsonDump{ThreadDump: jsonThreadDump{
		ProcessID:      strconv.Itoa(os.Getpid()),
		Time:           time.Now().UTC().Format(time.RFC3339Nano),
		RuntimeVersion: runtime.Version(),
		Tracking:       s.Tracking(),
	}}
	containers := []jsonContainer{{Container: root, Threads: []jsonThread{}}}
	groups := make(map[*scheduler.Group]int) // index in containers
	n := 0
	for t := range threads {
		n++
		i := 0
		if t.Group != nil {
			if i = groups[t.Group]; i == 0 {
				i = len(containers)
				groups[t.Group] = i
				containers = append(containers, jsonContainer{Container: fmt.Sprintf("group-%d", i), Parent: &root, Threads: []jsonThread{}})
			}
		}
		containers[i].Threads = append(containers[i].Threads, jsonThreadOf(t))
	}
	for i := range containers {
		containers[i].ThreadCount = strconv.Itoa(len(containers[i].Threads))
	}
	d.ThreadDump.ThreadContainers = containers
	d.ThreadDump.Live = s.Live()
	if d.ThreadDump.Tracking {
		d.ThreadDump.Live = max(d.ThreadDump.Live, n)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

func jsonThreadOf(t scheduler.ThreadInfo) jsonThread {
	j := jsonThread{TID: strconv.FormatUint(t.ID, 10), Name: t.Name, State: t.State.String(), Labels: t.Labels, Stack: []string{}, CreatedBy: []string{}}
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	if t.Carrier >= 0 {
		c := t.Carrier
		j.Carrier = &c
	}
	if !t.ParkedSince.IsZero() {
		ts := t.ParkedSince.UTC().Format(time.RFC3339Nano)
		j.ParkedSince = &ts
	}
	for _, f := range t.Stack {
		j.Stack = append(j.Stack, frameString(f))
	}
	for _, f := range stackFrames(t.CreatedBy) {
		j.CreatedBy = append(j.CreatedBy, frameString(f))
	}
	return j
}

// frameString formats a frame as jcmd does: function(file:line).
func frameString(f runtime.Frame) string {
	return fmt.Sprintf("%s(%s:%d)", f.Function, f.File, f.Line)
}
