package scheduler

import (
	"context"
	"strconv"
	"testing"

	"github.com/weftrt/weft"
)

// TestRecordMounts checks that a recorded mount labels the carrier with
// its thread and frozen frames, that threads mounting with the same frozen
// frames share one record, and that the thread's own labels come back.
func TestRecordMounts(t *testing.T) {
	s, err := New(Options{Carriers: 1, TrackThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop, ok := RecordMounts()
	if !ok {
		t.Fatal("RecordMounts refused")
	}
	if _, again := RecordMounts(); again {
		t.Fatal("a second RecordMounts while the first records")
	}
	const n = 10
	got := make([]map[string]string, n)
	vts := make([]*VThread, n)
	for i := range vts {
		vts[i], err = s.GoNamed("m", func(context.Context) error {
			parkDeep(3)
			got[i] = decodeLabels(profLabel())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, vt := range vts {
		waitParked(t, vt)
		vt.Unpark()
		if err := vt.Join(); err != nil {
			t.Fatal(err)
		}
	}
	frozen := stop()
	// A new thread's record (nothing frozen), and on the stack-copying
	// backend the park's; the portable backend freezes nothing.
	stackCopy := weft.ActiveBackend() == weft.StackCopying
	want := 1
	if stackCopy {
		want = 2
	}
	if len(frozen) != want {
		t.Errorf("%d records, want %d", len(frozen), want)
	}
	for i, l := range got {
		if l[LabelThread] != strconv.FormatUint(vts[i].ID(), 10) || l[LabelName] != "m" {
			t.Errorf("thread %d ran with labels %v", vts[i].ID(), l)
			continue
		}
		f, ok := frozen[l[LabelMount]]
		if !ok || (len(f) == 0) == stackCopy {
			t.Errorf("thread %d's mount %q has no frozen frames: %v", vts[i].ID(), l[LabelMount], f)
		}
	}
	// Stopped: a mount is no longer labelled.
	vt, _ := s.Go(func(context.Context) error {
		if l := decodeLabels(profLabel()); l[LabelMount] != "" {
			t.Errorf("a mount after the stop labelled %v", l)
		}
		return nil
	})
	vt.Join()
}
