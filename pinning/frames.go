package pinning

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/weftrt/weft/internal/rt"
)

// FrameReason reports whether a frame of the function that returns to pc
// (a return address, as runtime.Callers reports it) would pin a
// continuation whose suspended region contains it, and why. It is the
// stack-copying backend's classification of frames; the portable backend
// suspends through any frame, and pins only on CriticalSection,
// LockedThread and NativeFrame (a cgo callback).
//
//   - pinning.Do: CriticalSection.
//   - The Go side of a cgo call or callback (runtime.cgocall,
//     runtime.cgocallback and friends), or a pc outside Go code: NativeFrame.
//   - reflect call machinery (reflect.Value.Call, reflect.MakeFunc's
//     stubs, runtime.reflectcall and its call trampolines), whose argument
//     frames are built at run time: ReflectFrame.
//   - Other assembly, and functions that write SP: AssemblyFrame.
//   - Other runtime functions (runtime.*, internal/runtime/*): RuntimeFrame.
//     So are two functions of the standard library that put the calling
//     goroutine in a mode, in its g, for the length of a call, which
//     frozen frames would carry off and leave the goroutine in:
//     runtime/secret.Do (GOEXPERIMENT=runtimesecret; it counts secret mode
//     in the g and, as it returns, erases that goroutine's stack, which
//     the frames would have left for the heap) and
//     crypto/fips140.WithoutEnforcement (under GODEBUG=fips140=only it
//     exempts the goroutine from enforcement until it returns). (A third,
//     crypto/subtle.WithDataIndependentTiming, keeps a mode only on arm64
//     with DIT, where the stack-copying backend does not run; on amd64 it
//     just calls f. A port to arm64 must pin it.)
//
// Where weft cannot read the runtime's metadata (an unsupported Go release,
// or wasm) every frame is UnknownFrame.
func FrameReason(pc uintptr) (Reason, bool) {
	if !rt.Supported {
		return UnknownFrame, true
	}
	f := rt.FindFunc(pc - 1)
	if !f.Valid() {
		return NativeFrame, true
	}
	return funcReason(f.Name(), f.Flag(), f.Args())
}

// argsSizeUnknown is internal/abi.ArgsSizeUnknown: the argument size of
// reflect's MakeFunc and method-value stubs.
const argsSizeUnknown = -0x80000000

// doName is Do's name in the runtime's tables, taken from Do itself so that
// a copy of the module under another path recognises it too: a critical
// section that went unrecognised would be frozen.
var doName = runtime.FuncForPC(reflect.ValueOf(Do).Pointer()).Name()

func funcReason(name string, flag uint8, args int32) (Reason, bool) {
	switch {
	case name == doName:
		return CriticalSection, true
	case strings.HasPrefix(name, "runtime.cgocall") || name == "runtime.asmcgocall" || strings.HasPrefix(name, "runtime.cgocallback"):
		return NativeFrame, true
	case args == argsSizeUnknown || isReflectCall(name):
		return ReflectFrame, true
	case flag&(rt.FlagAsm|rt.FlagSPWrite) != 0:
		return AssemblyFrame, true
	case strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "internal/runtime/") ||
		strings.HasPrefix(name, "runtime/secret.") || name == "crypto/fips140.WithoutEnforcement":
		return RuntimeFrame, true
	}
	return 0, false
}

// isReflectCall reports whether name is part of reflect's call machinery.
func isReflectCall(name string) bool {
	switch name {
	case "reflect.Value.Call", "reflect.Value.CallSlice", "reflect.Value.call",
		"reflect.callReflect", "reflect.callMethod",
		"reflect.makeFuncStub", "reflect.methodValueCall",
		"runtime.reflectcall":
		return true
	}
	// runtime.call16 … runtime.call1073741824: reflectcall's trampolines.
	if rest, ok := strings.CutPrefix(name, "runtime.call"); ok && rest != "" {
		return strings.Trim(rest, "0123456789") == ""
	}
	return false
}
