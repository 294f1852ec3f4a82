//go:build !amd64 || race || msan || asan

package weft

import (
	"runtime"

	"github.com/weftrt/weft/pinning"
)

// This build has no stack-copying backend: selectBackend never picks it,
// so none of these is ever called.

const stackCopyBuilt = false

// stackState has what weft.Yield's stack-copying branch names, and the body.
type stackState struct {
	chunk stubChunk
	body  func()
}

// finished drops the body.
func (s *stackState) finished(keep bool) { *s = stackState{} }

type stubChunk struct{}

func (*stubChunk) capture(uintptr, bool, *counters) error { panic(noStackCopy) }
func (*stackState) settle(error) (bool, *errPinned)       { panic(noStackCopy) }
func (*stackState) leave(error) *errPinned                { panic(noStackCopy) }

const enterPC = 0

type errPinned struct {
	reason pinning.Reason
	pc     uintptr
}

func (c *Cont) freezeNested(*Cont) (bool, *errPinned)   { panic(noStackCopy) }
func (c *Cont) abandonFrozen()                          { panic(noStackCopy) }
func (c *Cont) traceFrozen() []runtime.Frame            { panic(noStackCopy) }
func (c *Cont) frozenDefers() bool                      { panic(noStackCopy) }
func (c *Cont) barrierPanicStack(any) []byte            { panic(noStackCopy) }
func (t *Cont) pinnedFrom(pe *errPinned) *pinning.Error { panic(noStackCopy) }
func stackCopyCheck() error                             { panic(noStackCopy) }

const noStackCopy = "weft: internal error: stack-copying backend used in a build without it"

// mount is Run, which here only calls acquire.
func (c *Cont) mount(owner any) {
	if c.acquire(owner) {
		panic(noStackCopy)
	}
}
