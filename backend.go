package weft

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/weftrt/weft/internal/rt"
)

// BackendName identifies a backend.
type BackendName string

// The backends.
const (
	// Portable runs each continuation on its own goroutine.
	Portable BackendName = "portable"
	// StackCopying freezes and thaws goroutine frames.
	StackCopying BackendName = "stackcopy"
)

// EnvBackend is the environment variable that selects a backend at
// start-up. "portable" forces the portable backend. "stackcopy" asks for
// the stack-copying one, which is used only where its self-check passes.
// Unset, the stack-copying backend is used where its self-check passes.
const EnvBackend = "WEFT_BACKEND"

// backendName and backendReason are the backend this process uses and
// why; useStackCopy is the engine's switch between the two backends. init
// fixes all three at start-up, not variable initializers. The
// stack-copying probe runs a continuation through Run and Yield, which
// read useStackCopy: an initializer that reached them would depend on
// itself.
var (
	backendName   BackendName
	backendReason string
	useStackCopy  bool
)

func init() {
	backendName, backendReason = selectBackend(os.Getenv(EnvBackend))
	useStackCopy = backendName == StackCopying
}

// selectBackend decides the backend for this process from the value of
// WEFT_BACKEND, and says why.
func selectBackend(env string) (BackendName, string) {
	// Before any continuation runs: mounts and yields compare thread
	// lock counts (pinning.LockedThread).
	rt.InitLockCount()
	switch env {
	case "":
		if err := stackCopyReady(); err != nil {
			return Portable, err.Error()
		}
		return StackCopying, "the default on linux/amd64; the runtime self-check and probe passed"
	case string(Portable):
		return Portable, EnvBackend + "=portable"
	case string(StackCopying):
		if err := stackCopyReady(); err != nil {
			return Portable, EnvBackend + "=stackcopy was asked for, but " + err.Error()
		}
		return StackCopying, EnvBackend + "=stackcopy; the runtime self-check and probe passed"
	default:
		return Portable, fmt.Sprintf("%s=%q is not a backend (want %q or %q)", EnvBackend, env, Portable, StackCopying)
	}
}

// stackCopyReady reports why the stack-copying backend cannot run in this
// process, or nil if it can. The check runs once.
var stackCopyReady = sync.OnceValue(func() error {
	switch {
	case instrumented != "":
		return fmt.Errorf("this is a %s build: its instrumentation cannot follow frames that move between goroutines", instrumented)
	case !stackCopyBuilt || runtime.GOOS != "linux":
		return fmt.Errorf("the stack-copying backend is built for linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	case checkptrBuild():
		return errors.New("this build is instrumented with -d=checkptr, which the stack-copying backend does not support")
	}
	return stackCopyCheck()
})

// checkptrBuild reports whether the binary's recorded build flags turn on
// checkptr instrumentation without -race.
func checkptrBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-gcflags" && strings.Contains(s.Value, "checkptr") &&
			!strings.Contains(s.Value, "checkptr=0") {
			return true
		}
	}
	return false
}

// EnvThaw is the environment variable that selects the stack-copying
// backend's thaw policy at start-up. "lazy", the default, thaws the
// innermost frames and leaves a return barrier beneath them. "eager" keeps
// every capture in one record, so every resume thaws and every yield
// freezes the whole region. Eager thaw exists to measure what lazy thaw
// saves.
const EnvThaw = "WEFT_THAW"

// eagerThaw is the thaw policy, fixed at start-up; an unknown value of
// WEFT_THAW is reported by Backend and ignored.
var eagerThaw, thawNote = thawPolicy(os.Getenv(EnvThaw))

func thawPolicy(env string) (eager bool, note string) {
	switch env {
	case "", "lazy":
		return false, ""
	case "eager":
		return true, "; eager thaw (" + EnvThaw + "=eager)"
	default:
		return false, fmt.Sprintf("; %s=%q ignored (want \"lazy\" or \"eager\")", EnvThaw, env)
	}
}

// ActiveBackend returns the backend in use for this process.
func ActiveBackend() BackendName { return backendName }

// Backend describes the backend in use and why it was chosen, for example
// "portable (WEFT_BACKEND=portable)".
func Backend() string {
	if backendName != StackCopying {
		return fmt.Sprintf("%s (%s)", backendName, backendReason)
	}
	return fmt.Sprintf("%s (%s%s)", backendName, backendReason, thawNote)
}
