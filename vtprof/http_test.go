package vtprof

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goTool returns the go command of the toolchain running the test.
func goTool(t *testing.T) string {
	t.Helper()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to run go tool pprof with")
		}
	}
	return goCmd
}

func get(t *testing.T, url string) (string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), resp.Header
}

func TestHandler(t *testing.T) {
	freezeRate(t, 1) // before the threads park, which freezes them
	s, _ := parked(t, 4)
	s.SetParkProfileRate(1)
	defer s.SetParkProfileRate(0)
	mux := http.NewServeMux()
	mux.Handle("/debug/vthreads/", http.StripPrefix("/debug/vthreads", Handler(s)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := srv.URL + "/debug/vthreads/"

	index, _ := get(t, base)
	for _, e := range endpoints {
		if !strings.Contains(index, `href="`+e.name+`"`) {
			t.Errorf("the index has no link to %s", e.name)
		}
	}
	if text, _ := get(t, base+"threads?debug=1"); !strings.Contains(text, "state: parked") {
		t.Errorf("threads?debug=1:\n%s", text)
	}
	if text, _ := get(t, base+"threads?debug=2"); strings.Count(text, "[parked") != 4 {
		t.Errorf("threads?debug=2:\n%s", text)
	}
	js, h := get(t, base+"threads.json")
	var d jsonDump
	if err := json.Unmarshal([]byte(js), &d); err != nil || h.Get("Content-Type") != "application/json" {
		t.Errorf("threads.json: %v, %s", err, h.Get("Content-Type"))
	}
	if text, _ := get(t, base+"state"); !strings.HasPrefix(text, "scheduler: 2 carriers,") || !strings.Contains(text, "4 parked") {
		t.Errorf("state:\n%s", text)
	}
	var v vars
	if text, _ := get(t, base+"vars"); json.Unmarshal([]byte(text), &v) != nil || v.Live != 4 || v.Carriers != 2 || !v.Tracking || v.ParkProfileRate != 1 || v.FreezeProfileRate != 1 {
		t.Errorf("vars: %s", text)
	}
	resp, err := http.Get(base + "nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown endpoint: %s", resp.Status)
	}

	// go tool pprof reads every profile endpoint.
	goCmd := goTool(t)
	for _, ep := range []struct{ path, want string }{
		{"threads", "parkDeep"},
		{"pinned", ""},
		{"parks", ""},
		{"freeze", "parkDeep"},
		{"profile?seconds=1", ""},
	} {
		out, err := exec.Command(goCmd, "tool", "pprof", "-traces", base+ep.path).CombinedOutput()
		if err != nil {
			t.Errorf("go tool pprof -traces %s: %v\n%s", ep.path, err, out)
			continue
		}
		if !strings.Contains(string(out), ep.want) {
			t.Errorf("go tool pprof -traces %s has no %s:\n%s", ep.path, ep.want, out)
		}
	}
}
