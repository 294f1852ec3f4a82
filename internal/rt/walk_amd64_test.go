package rt

import (
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/weftrt/weft/arch"
)

// walkFrames unwinds the calling goroutine from (pc, sp) with FindFunc and
// SPDelta, the way runtime.unwinder does on amd64, and returns the entry of
// each physical frame, innermost first, down to runtime.goexit.
func walkFrames(pc uintptr, sp unsafe.Pointer) []uintptr {
	var entries []uintptr
	for i := 0; i < 10000; i++ {
		f := FindFunc(pc)
		if !f.Valid() {
			break
		}
		entries = append(entries, f.Entry())
		if f.FuncID() == FuncIDGoexit {
			break
		}
		d := f.SPDelta(pc)
		if d < 0 {
			break
		}
		fp := unsafe.Add(sp, uintptr(d)+arch.FrameLinkSize)
		pc = *(*uintptr)(unsafe.Add(fp, -arch.FrameLinkSize))
		sp = fp
	}
	return entries
}

// physicalEntries turns runtime.Callers PCs into the entries of physical
// frames: inlined frames share their caller's physical frame, so
// consecutive duplicates are dropped.
func physicalEntries(pcs []uintptr) []uintptr {
	var entries []uintptr
	frames := runtime.CallersFrames(pcs)
	for {
		fr, more := frames.Next()
		if fr.Func != nil || fr.Entry != 0 {
			e := FindFunc(fr.PC).Entry()
			if len(entries) == 0 || entries[len(entries)-1] != e {
				entries = append(entries, e)
			}
		}
		if !more {
			return entries
		}
	}
}

//go:noinline
func walkA(depth int, big bool) ([]uintptr, []uintptr) {
	if big {
		var pad [4096]byte // frames of different sizes
		pad[depth%len(pad)] = byte(depth)
		if depth > 0 {
			a, b := walkB(depth-1, !big)
			return a, append(b, uintptr(pad[depth%len(pad)]))[:len(b)]
		}
	}
	if depth > 0 {
		return walkB(depth-1, !big)
	}
	return walkHere()
}

//go:noinline
func walkB(depth int, big bool) ([]uintptr, []uintptr) { return walkA(depth, big) }

//go:noinline
func walkHere() (walked, callers []uintptr) {
	pcs := make([]uintptr, 512)
	n := runtime.Callers(1, pcs) // walkHere and its callers
	pc, sp := arch.CallerPCSP()
	return walkFrames(pc, sp), physicalEntries(pcs[:n])
}

// Walking a goroutine's own stack with the decoded SP tables must find the
// same physical frames as the runtime's unwinder.
func TestWalkMatchesRuntime(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	// The walk holds pointers into the stack it walks, which the runtime
	// relocates if the stack moves; still, keep it still (pre-grown, no GC)
	// so that a wrong delta shows as a wrong frame, not as a moved one.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, depth := range []int{0, 1, 7, 50} {
		done := make(chan struct{})
		go func() { // on a fresh goroutine, so the walk ends at goexit
			defer close(done)
			growStack(64 << 10)
			walked, callers := walkA(depth, depth%2 == 0)
			if len(walked) < depth+3 || !slices.Equal(walked, callers) {
				t.Errorf("depth %d: walked %d frames, runtime.Callers %d:\nwalked  %x\ncallers %x",
					depth, len(walked), len(callers), walked, callers)
			}
			if last := FindFunc(walked[len(walked)-1]); last.Name() != "runtime.goexit" {
				t.Errorf("depth %d: walk ended at %s, not runtime.goexit", depth, last.Name())
			}
		}()
		<-done
	}
}

//go:noinline
func growStack(n int) byte {
	var buf [1024]byte
	if n <= 0 {
		return buf[0]
	}
	return growStack(n-len(buf)) + buf[n%len(buf)]
}

// inlA and inlB are small enough to be inlined into their callers, so the
// physical frame of logicalHere's caller holds three logical frames.
func inlA() ([]uintptr, []uintptr) { return inlB() }
func inlB() ([]uintptr, []uintptr) { return logicalHere() }

//go:noinline
func logicalHere() (expanded, callers []uintptr) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(1, pcs) // logicalHere and its callers
	pc, sp := arch.CallerPCSP()
	for i := 0; i < 64; i++ {
		f := FindFunc(pc)
		if !f.Valid() {
			break
		}
		expanded = f.LogicalPCs(pc, expanded)
		if f.FuncID() == FuncIDGoexit {
			break
		}
		fp := unsafe.Add(sp, uintptr(f.SPDelta(pc))+arch.FrameLinkSize)
		pc, sp = *(*uintptr)(unsafe.Add(fp, -arch.FrameLinkSize)), fp
	}
	return expanded, pcs[:n]
}

// Expanding each physical frame with LogicalPCs gives what runtime.Callers
// gives: one PC per logical frame, inlined ones included.
func TestLogicalPCsMatchCallers(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		expanded, callers := inlA()
		names := func(pcs []uintptr) (out []string) {
			fs := runtime.CallersFrames(pcs)
			for {
				f, more := fs.Next()
				out = append(out, f.Function)
				if !more {
					return out
				}
			}
		}
		got, want := names(expanded), names(callers)
		if !slices.Equal(got, want) {
			t.Errorf("expanded frames\n%q\nruntime.Callers\n%q", got, want)
		}
		if !slices.ContainsFunc(want, func(fn string) bool { return strings.HasSuffix(fn, "/internal/rt.inlA") }) {
			t.Errorf("inlA is not among the frames, the test proves nothing: %q", want)
		}
	}()
	<-done
}
