//go:build amd64

package pinning_test

import (
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weftrt/weft/arch"
	"github.com/weftrt/weft/internal/rt"
	"github.com/weftrt/weft/pinning"
)

// region classifies the physical frames of the calling goroutine from the
// caller of region down to (not including) the frame of the function named
// stop, walking them with the runtime's metadata as freeze does (unlike
// runtime.Callers, which hides wrapper frames such as reflect's stubs).
//
//go:noinline
func region(stop string) (reasons map[pinning.Reason][]string, frames []string) {
	reasons = map[pinning.Reason][]string{}
	pc, sp := arch.CallerPCSP()
	fr := rt.FrameAt(pc, sp).Caller() // region's caller
	for fr.Fn.Valid() {
		name := fr.Fn.Name()
		if name == stop {
			return reasons, frames
		}
		frames = append(frames, name)
		if r, pinned := pinning.FrameReason(fr.PC); pinned {
			reasons[r] = append(reasons[r], name)
		}
		fr = fr.Caller()
	}
	panic("region: " + stop + " is not on the stack")
}

func requireSupported(t *testing.T) {
	if !rt.Supported {
		t.Skipf("weft cannot read the runtime's metadata on %s %s/%s; FrameReason says UnknownFrame for every frame there",
			runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
}

// thisPkg is the prefix of this test package's function names, from one of
// them rather than a literal (a copy of the module under another path runs
// these tests too).
var thisPkg = strings.TrimSuffix(runtime.FuncForPC(reflect.ValueOf(pkgAnchor).Pointer()).Name(), "pkgAnchor")

func pkgAnchor() {}

// Callbacks from ordinary library code, sort.Slice here, pin nothing: that
// is what lets the stack-copying backend yield from them.
func TestFrameReasonStdlibCallback(t *testing.T) {
	requireSupported(t)
	var got map[pinning.Reason][]string
	var frames []string
	xs := []int{3, 1, 2}
	sort.Slice(xs, func(i, j int) bool {
		if got == nil {
			got, frames = region(thisPkg + "TestFrameReasonStdlibCallback")
		}
		return xs[i] < xs[j]
	})
	if len(got) != 0 {
		t.Fatalf("frames under sort.Slice pinned: %v", got)
	}
	if !strings.Contains(strings.Join(frames, " "), "sort.Slice") {
		t.Fatalf("sort.Slice is not among the frames: %v", frames)
	}
}

// The frames reflect.Value.Call puts between its caller and the function
// it calls pin nothing: Value.call, the ABI wrapper runtime.reflectcall and
// a trampoline runtime.callN are all walked, and all movable. So are those
// of CallSlice and of a method called through Method(i).Call.
func TestFrameReasonReflectCall(t *testing.T) {
	requireSupported(t)
	check := func(name string, call func(f func())) {
		t.Helper()
		var got map[pinning.Reason][]string
		var frames []string
		call(func() { got, frames = region(thisPkg + "TestFrameReasonReflectCall") })
		if len(got) != 0 {
			t.Errorf("%s: frames pinned: %v", name, got)
		}
		all := strings.Join(frames, " ")
		for _, want := range []string{"reflect.Value.call", "runtime.reflectcall", "runtime.call"} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: no %s frame among %v", name, want, frames)
			}
		}
	}
	check("Call", func(f func()) { reflect.ValueOf(f).Call(nil) })
	check("CallSlice", func(f func()) {
		reflect.ValueOf(func(...int) { f() }).CallSlice([]reflect.Value{reflect.ValueOf([]int{1})})
	})
	check("Method", func(f func()) { reflect.ValueOf(frameMethoder{f}).Method(0).Call(nil) })
}

type frameMethoder struct{ f func() }

func (m frameMethoder) Run() { m.f() }

// reflect.MakeFunc's stub, and a method value's, have an argument size
// known only at run time: they pin with ReflectFrame.
func TestFrameReasonReflectStub(t *testing.T) {
	requireSupported(t)
	var mf map[pinning.Reason][]string
	fn := reflect.MakeFunc(reflect.TypeOf(func() {}), func([]reflect.Value) []reflect.Value {
		mf, _ = region(thisPkg + "TestFrameReasonReflectStub")
		return nil
	}).Interface().(func())
	fn()
	if !strings.Contains(strings.Join(mf[pinning.ReflectFrame], " "), "reflect.makeFuncStub") {
		t.Fatalf("reflect.makeFuncStub is not a ReflectFrame: %v", mf)
	}
	var mv map[pinning.Reason][]string
	m := reflect.ValueOf(frameMethoder{func() {
		mv, _ = region(thisPkg + "TestFrameReasonReflectStub")
	}}).Method(0).Interface().(func())
	m()
	if !strings.Contains(strings.Join(mv[pinning.ReflectFrame], " "), "reflect.methodValueCall") {
		t.Fatalf("reflect.methodValueCall is not a ReflectFrame: %v", mv)
	}
}

func TestFrameReasonCriticalSection(t *testing.T) {
	requireSupported(t)
	var got map[pinning.Reason][]string
	pinning.Do(func() { got, _ = region(thisPkg + "TestFrameReasonCriticalSection") })
	if len(got) != 1 || len(got[pinning.CriticalSection]) != 1 {
		t.Fatalf("pinning.Do must pin as CriticalSection only: %v", got)
	}
}

// A cleanup runs on a runtime goroutine: runtime frames lie under it.
func TestFrameReasonRuntime(t *testing.T) {
	requireSupported(t)
	if r, pinned := pinning.FrameReason(reflect.ValueOf(runtime.GC).Pointer() + 1); !pinned || r != pinning.RuntimeFrame {
		t.Fatalf("runtime.GC: %v %v, want RuntimeFrame", r, pinned)
	}
	done := make(chan map[pinning.Reason][]string, 1)
	func() {
		obj := new([64]byte)
		runtime.AddCleanup(obj, func(int) {
			pcs := make([]uintptr, 64)
			n := runtime.Callers(1, pcs)
			got := map[pinning.Reason][]string{}
			for _, pc := range pcs[:n] {
				if r, pinned := pinning.FrameReason(pc); pinned {
					got[r] = append(got[r], rt.FindFunc(pc-1).Name())
				}
			}
			done <- got
		}, 0)
	}()
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case got := <-done:
			if len(got[pinning.RuntimeFrame]) == 0 {
				t.Fatalf("no runtime frames under a cleanup: %v", got)
			}
			return
		case <-deadline:
			t.Fatal("the cleanup never ran")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestFrameReasonOutsideGo(t *testing.T) {
	requireSupported(t)
	if r, pinned := pinning.FrameReason(1); !pinned || r != pinning.NativeFrame {
		t.Fatalf("a pc outside Go code: %v %v, want NativeFrame", r, pinned)
	}
}
