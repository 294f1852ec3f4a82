//go:build !amd64 || race || msan || asan

package weft

import (
	"runtime"

	"github.com/weftrt/weft/pinning"
)

// This build has no stack-copying backend: selectBackend never picks it,
// so none of these is ever called.

const stackCopyBuilt = false

// scCont has what weft.Yield's stack-copying branch names, and the body.
type scCont struct {
	chunk stubChunk
	body  func()
}

// finished drops the body.
func (s *scCont) finished(keep bool) { *s = scCont{} }

type stubChunk struct{}

func (*stubChunk) capture(uintptr, bool, *counters) error { panic(noStackCopy) }
func (*scCont) settle(error) (bool, *errPinned)           { panic(noStackCopy) }
func (*scCont) leave(error) *errPinned                    { panic(noStackCopy) }

const scEntry = 0

type errPinned struct {
	reason pinning.Reason
	pc     uintptr
}

func (c *Cont) scSuspend(*Cont) (bool, *errPinned)      { panic(noStackCopy) }
func (c *Cont) scTrace() []runtime.Frame                { panic(noStackCopy) }
func (c *Cont) scPanicStack(any) []byte                 { panic(noStackCopy) }
func (t *Cont) pinnedFrom(pe *errPinned) *pinning.Error { panic(noStackCopy) }
func stackCopyCheck() error                             { panic(noStackCopy) }

const noStackCopy = "weft: internal error: stack-copying backend used in a build without it"

// mount is Run, which here only calls acquire.
func (c *Cont) mount(owner any, abandon bool) {
	if c.acquire(owner) {
		panic(noStackCopy)
	}
}
