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
//   - reflect.MakeFunc's and method values' stubs (reflect.makeFuncStub,
//     reflect.methodValueCall, and reflect.callReflect and
//     reflect.callMethod, which point into their frames): ReflectFrame.
//     A stub's argument map and stack object are known only at run time,
//     from the closure it saves in its frame and a flag its callee sets.
//     A frame descriptor depends only on the PC, so it cannot describe
//     them.
//   - The frames of reflect.Value.Call, CallSlice and Method(i).Call do
//     not pin: reflect.Value.call, the ABI wrapper runtime.reflectcall and
//     the trampolines runtime.call16 … runtime.call1073741824. Each has a
//     fixed size and stack maps at its one call: a trampoline's locals hold
//     only its callee's arguments, which the callee's argument map
//     describes, and its own arguments have the map of its Go declaration.
//     A trampoline that wrote SP would pin as AssemblyFrame.
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
	case args == argsSizeUnknown || isReflectStub(name):
		return ReflectFrame, true
	case isReflectCall(name) && flag&rt.FlagSPWrite == 0:
		return 0, false
	case flag&(rt.FlagAsm|rt.FlagSPWrite) != 0:
		return AssemblyFrame, true
	case strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "internal/runtime/") ||
		strings.HasPrefix(name, "runtime/secret.") || name == "crypto/fips140.WithoutEnforcement":
		return RuntimeFrame, true
	}
	return 0, false
}

// isReflectStub reports whether name is one of reflect's MakeFunc and
// method-value stubs, or a function they call with pointers into their
// frames.
func isReflectStub(name string) bool {
	switch name {
	case "reflect.callReflect", "reflect.callMethod",
		"reflect.makeFuncStub", "reflect.methodValueCall":
		return true
	}
	return false
}

// isReflectCall reports whether name is one of the frames reflect.Value.Call
// puts between its caller and the function it calls. runtime.reflectcall
// is the compiler's ABI wrapper: the assembly function of that name jumps
// to a trampoline and has no frame.
func isReflectCall(name string) bool {
	switch name {
	case "reflect.Value.Call", "reflect.Value.CallSlice", "reflect.Value.call",
		"runtime.reflectcall":
		return true
	}
	// runtime.call16 … runtime.call1073741824: reflectcall's trampolines.
	if rest, ok := strings.CutPrefix(name, "runtime.call"); ok && rest != "" {
		return strings.Trim(rest, "0123456789") == ""
	}
	return false
}
