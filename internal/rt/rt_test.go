package rt

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

func TestVerify(t *testing.T) {
	if !Supported {
		if err := Verify(); err == nil {
			t.Fatalf("Verify() = nil for %s on %s, whose layout is not mirrored", runtime.Version(), runtime.GOARCH)
		}
		return
	}
	if err := Verify(); err != nil {
		t.Fatal(err)
	}
}

// Every function in the module, looked up at its entry and in its middle,
// must match what the runtime's public API says.
func TestEveryFunctionMatchesRuntime(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	f := FindFunc(funcPC(t))
	if !f.Valid() {
		t.Fatal("FindFunc found nothing for a test function")
	}
	ftab := f.datap.ftab
	checked, inlineFree, native := 0, 0, 0
	for i := 0; i < len(ftab)-1; i++ { // the last entry marks the end of text
		entry := f.datap.textAddr(ftab[i].entryoff)
		end := f.datap.textAddr(ftab[i+1].entryoff)
		rf := runtime.FuncForPC(entry)
		if rf == nil {
			continue
		}
		for _, pc := range []uintptr{entry, entry + (end-entry)/2, end - 1} {
			g, r := FindFunc(pc), runtime.FuncForPC(pc)
			if !g.Valid() || g.Entry() != r.Entry() {
				t.Fatalf("pc %#x: FindFunc says %q at %#x, runtime says %q at %#x", pc, g.Name(), g.Entry(), r.Name(), r.Entry())
			}
			if err := checkName(g, pc, r.Name()); err != nil {
				t.Fatal(err)
			}
			if g.PCData(PCDATAInlTreeIndex, pc) < 0 {
				inlineFree++
			}
		}
		// C code linked in (cgo, the race detector's runtime) and linker
		// marker symbols have no pcsp table: their SP delta is unknown.
		g := FindFunc(entry)
		want := int32(0)
		if g.f.pcsp == 0 {
			want = -1
			native++
		}
		if d := g.SPDelta(entry); d != want {
			t.Fatalf("%s: SP delta %d at entry, want %d", rf.Name(), d, want)
		}
		checked++
	}
	if checked < 1000 || inlineFree < checked {
		t.Fatalf("checked only %d functions, %d PCs outside inlined code", checked, inlineFree)
	}
	t.Logf("%d functions match the runtime (%d PCs compared by name; %d functions without SP tables)", checked, inlineFree, native)
}

func TestFindFuncOutsideGo(t *testing.T) {
	if FindFunc(0).Valid() || FindFunc(1).Valid() {
		t.Fatal("FindFunc found a function at a null PC")
	}
}

func TestFuncData(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	// A function with pointer arguments and locals has argument and
	// locals pointer maps; the maps start with the number of bitmaps.
	f := FindFunc(funcPC(t))
	for _, i := range []uint8{FUNCDATAArgsPointerMaps, FUNCDATALocalsPointerMaps} {
		p := f.FuncData(i)
		if p == nil {
			t.Fatalf("FUNCDATA %d of %s is nil", i, f.Name())
		}
		if n := *(*int32)(p); n <= 0 || n > 1000 {
			t.Fatalf("FUNCDATA %d of %s: %d bitmaps", i, f.Name(), n)
		}
	}
	if f.FuncData(200) != nil {
		t.Fatal("FuncData past nfuncdata is not nil")
	}
	if v := f.PCData(200, f.Entry()); v != -1 {
		t.Fatalf("PCData of a missing table = %d, want -1", v)
	}
}

// funcPC returns a PC inside this function, which has pointer arguments
// and pointer locals live across calls.
//
//go:noinline
func funcPC(t *testing.T) uintptr {
	var pcs [1]uintptr
	s := []string{t.Name()}
	runtime.Callers(1, pcs[:])
	t.Log(len(s[0]) > 0)
	return pcs[0] - 1
}

// funcPCOf returns the entry PC of a function value's code.
func funcPCOf(f any) uintptr { return reflect.ValueOf(f).Pointer() }

func TestLocked(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	done := make(chan string)
	go func() {
		locked, ok := Locked()
		if !ok {
			done <- "runtime.g.lockedm was not found"
			return
		}
		if locked {
			done <- "a fresh goroutine reads as locked"
			return
		}
		runtime.LockOSThread()
		locked, _ = Locked()
		runtime.UnlockOSThread()
		if !locked {
			done <- "a goroutine locked with runtime.LockOSThread reads as unlocked"
			return
		}
		if locked, _ = Locked(); locked {
			done <- "a goroutine reads as locked after runtime.UnlockOSThread"
			return
		}
		done <- ""
	}()
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
}

func TestLockCount(t *testing.T) {
	if !Supported {
		t.Skip("runtime layout not mirrored")
	}
	done := make(chan string)
	go func() {
		for want := uint32(0); want < 3; want++ {
			n, ok := LockCount()
			if !ok {
				done <- "runtime.m.lockedExt was not found"
				return
			}
			if n != want {
				done <- fmt.Sprintf("LockCount = %d after %d LockOSThread calls", n, want)
				return
			}
			if c := CurLockCount(); c != want {
				done <- fmt.Sprintf("CurLockCount = %d after %d LockOSThread calls", c, want)
				return
			}
			runtime.LockOSThread()
		}
		for want := uint32(3); want > 0; want-- {
			if n, _ := LockCount(); n != want {
				done <- fmt.Sprintf("LockCount = %d with %d LockOSThread calls outstanding", n, want)
				return
			}
			if c := CurLockCount(); c != want {
				done <- fmt.Sprintf("CurLockCount = %d with %d LockOSThread calls outstanding", c, want)
				return
			}
			runtime.UnlockOSThread()
		}
		if n, _ := LockCount(); n != 0 {
			done <- fmt.Sprintf("LockCount = %d after every UnlockOSThread", n)
			return
		}
		done <- ""
	}()
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
}
