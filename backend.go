package weft

import (
	"fmt"
	"os"
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

// EnvBackend is the environment variable that selects a backend at start-up:
// "portable" forces the portable backend; "stackcopy" asks for the
// stack-copying one, which is used only where its self-check passes.
const EnvBackend = "WEFT_BACKEND"

var backendName, backendReason = selectBackend(os.Getenv(EnvBackend))

// selectBackend decides the backend for this process from the value of
// WEFT_BACKEND, and says why.
func selectBackend(env string) (BackendName, string) {
	switch env {
	case "":
		return Portable, "the stack-copying backend is not part of this build yet"
	case string(Portable):
		return Portable, EnvBackend + "=portable"
	case string(StackCopying):
		return Portable, EnvBackend + "=stackcopy was asked for, but the stack-copying backend is not part of this build yet"
	default:
		return Portable, fmt.Sprintf("%s=%q is not a backend (want %q or %q)", EnvBackend, env, Portable, StackCopying)
	}
}

// ActiveBackend returns the backend in use for this process.
func ActiveBackend() BackendName { return backendName }

// Backend describes the backend in use and why it was chosen, for example
// "portable (WEFT_BACKEND=portable)".
func Backend() string { return fmt.Sprintf("%s (%s)", backendName, backendReason) }
