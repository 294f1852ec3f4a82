package vtprof

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weftrt/weft"
	"github.com/weftrt/weft/scheduler"
)

// WriteState writes a text page of s's state: its carriers and their run
// queues, the compensation carriers, the threads blocked pinned and the
// live count.
func WriteState(w io.Writer, s *scheduler.Scheduler) error {
	st := s.State()
	var b strings.Builder
	tracking := "off"
	if st.Tracking {
		tracking = "on"
	}
	fmt.Fprintf(&b, "scheduler: %d carriers, %d compensation carriers, %d blocked pinned, %d live virtual threads, %d on the global queue, tracking %s",
		len(st.Carriers), st.Compensation, st.Blocked, st.Live, st.Global, tracking)
	if st.Closing {
		b.WriteString(", closing")
	}
	b.WriteByte('\n')
	for _, c := range st.Carriers {
		what := "busy"
		if c.Idle {
			what = "idle"
		}
		fmt.Fprintf(&b, "carrier %d: %s, %d queued\n", c.ID, what, c.Queued)
	}
	if st.Tracking {
		counts := map[scheduler.ThreadState]int{}
		for t := range s.Threads() {
			counts[t.State]++
		}
		fmt.Fprintf(&b, "threads: %d running, %d queued, %d parked, %d pinned\n",
			counts[scheduler.Running], counts[scheduler.Queued], counts[scheduler.Parked], counts[scheduler.Pinned])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// vars are the counters of the vars endpoint.
type vars struct {
	Live            int    `json:"live"`
	Carriers        int    `json:"carriers"`
	Compensation    int    `json:"compensation"`
	BlockedPinned   int    `json:"blockedPinned"`
	GlobalQueue     int    `json:"globalQueue"`
	LocalQueues     int    `json:"localQueues"`
	Pins            uint64 `json:"pins"`
	Tracking        bool   `json:"tracking"`
	ParkProfileRate int    `json:"parkProfileRate"`
	PinThresholdNs  int64  `json:"pinThresholdNs"`
	// FreezeProfileRate is the engine's (weft.SetFreezeProfileRate).
	FreezeProfileRate int `json:"freezeProfileRate"`
}

// WriteVars writes s's counters as one JSON object, in the manner of
// expvar: live threads, carriers, compensation carriers, threads blocked
// pinned, queue lengths, pins counted (Scheduler.Pins) and the profiles'
// settings.
func WriteVars(w io.Writer, s *scheduler.Scheduler) error {
	st := s.State()
	v := vars{Live: st.Live, Carriers: len(st.Carriers), Compensation: st.Compensation, BlockedPinned: st.Blocked,
		GlobalQueue: st.Global, Tracking: st.Tracking, ParkProfileRate: s.ParkProfileRate(), PinThresholdNs: int64(s.PinThreshold()),
		FreezeProfileRate: weft.FreezeProfileRate()}
	for _, c := range st.Carriers {
		v.LocalQueues += c.Queued
	}
	for _, p := range s.Pins() {
		v.Pins += p.Count
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// The handler's endpoints, with what the index says of each.
var endpoints = []struct{ name, what string }{
	{"threads", "every virtual thread with its stack, state and labels (debug=0: profile.proto, 1: text, 2: one block per thread)"},
	{"threads.json", "the same in the JSON shape of jcmd Thread.dump_to_file"},
	{"pinned", "parks and yields that could not suspend, with reason and blocked time (debug=1: text)"},
	{"parks", "where virtual threads park and for how long (on once SetParkProfileRate is set; debug=1: text)"},
	{"freeze", "where continuations are frozen and thawed: captures, frames and bytes, barrier crossings (on once weft.SetFreezeProfileRate is set; debug=1: text)"},
	{"profile", "CPU profile with whole virtual-thread stacks; seconds=N (default 30)"},
	{"state", "carriers, run queues, compensation carriers and counts (text)"},
	{"vars", "counters (JSON)"},
}

// Handler returns an HTTP handler that serves s's profiles in the manner
// of net/http/pprof: an index at its root and one endpoint each for the
// thread dump (threads, threads.json), the pinning profile (pinned), the
// park profile (parks), the engine's freeze/thaw profile (freeze), a CPU
// profile with whole stacks (profile), the scheduler's state (state) and
// its counters (vars). Mount it under a
// prefix with http.StripPrefix, as the Example shows; each profile
// endpoint is readable by go tool pprof.
func Handler(s *scheduler.Scheduler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		debug, _ := strconv.Atoi(r.FormValue("debug"))
		binary := func(file string) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
		}
		text := func() { w.Header().Set("Content-Type", "text/plain; charset=utf-8") }
		var err error
		switch name {
		case "":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			var b strings.Builder
			b.WriteString("<html><head><title>weft virtual threads</title></head><body>\n<h1>weft virtual threads</h1>\n<table>\n")
			for _, e := range endpoints {
				fmt.Fprintf(&b, "<tr><td><a href=\"%s\">%s</a></td><td>%s</td></tr>\n", e.name, e.name, html.EscapeString(e.what))
			}
			b.WriteString("</table>\n<p>Read a profile with <code>go tool pprof http://HOST/PATH/threads</code>.</p>\n</body></html>\n")
			_, err = io.WriteString(w, b.String())
		case "threads":
			if debug > 0 {
				text()
			} else {
				binary("vthreads")
			}
			err = WriteThreads(w, s, debug)
		case "threads.json":
			w.Header().Set("Content-Type", "application/json")
			err = WriteThreadsJSON(w, s)
		case "pinned":
			if debug > 0 {
				text()
			} else {
				binary("pinned")
			}
			err = WritePinProfile(w, s, debug)
		case "parks":
			if debug > 0 {
				text()
			} else {
				binary("parks")
			}
			err = WriteParkProfile(w, s, debug)
		case "freeze":
			if debug > 0 {
				text()
			} else {
				binary("freeze")
			}
			err = WriteFreezeProfile(w, debug)
		case "profile":
			sec, _ := strconv.Atoi(r.FormValue("seconds"))
			if sec <= 0 {
				sec = 30
			}
			binary("profile")
			err = CPUProfile(r.Context(), w, time.Duration(sec)*time.Second)
			if errors.Is(err, ErrProfiling) {
				w.Header().Del("Content-Disposition")
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
		case "state":
			text()
			err = WriteState(w, s)
		case "vars":
			w.Header().Set("Content-Type", "application/json")
			err = WriteVars(w, s)
		default:
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}
