package weft

import "github.com/weftrt/weft/pinning"

// Handler is how the package that owns a continuation's API-level handle
// hears of the events it handles itself. One Handler serves every
// continuation of that package (SetHandler).
type Handler struct {
	// Pinned runs inside Yield for every pinned yield that names the
	// continuation, before Yield returns perr. It may panic. Package
	// continuation calls the handle's onPinned handler from it.
	Pinned func(c *Cont, perr *pinning.Error)

	// Abandonable runs at most once per continuation (once more after a
	// Reset), on the goroutine that called Run. It runs when c has just
	// been suspended holding what only Abandon ends: on the portable
	// backend its body goroutine, on the stack-copying one frozen frames
	// with deferred calls pending, c's own or those of continuations
	// suspended inside it. owner is Run's. From then on the owner must
	// call Abandon when it drops c suspended: package continuation
	// registers a cleanup. A continuation dropped suspended before that
	// is reclaimed by the collector alone, as unwinding it would run
	// nothing. It must not panic or run c.
	Abandonable func(c *Cont, owner any)
}

// SetHandler makes h c's handler. It must not be changed while c is
// running. Reset clears it.
func (c *Cont) SetHandler(h *Handler) { c.handler = h }

// arm runs c's Abandonable handler. c is mounted, and has just been
// suspended holding what only Abandon ends.
//
//go:noinline
func (c *Cont) arm() {
	c.armed = true
	if h := c.handler; h != nil && h.Abandonable != nil {
		h.Abandonable(c, c.owner)
	}
}
