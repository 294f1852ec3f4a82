//go:build !(linux && amd64 && !race && go1.25 && !go1.28)

package gls

// This build keeps every record in the table: the word is measured and
// checked on linux/amd64 only, and a -race build's runtime uses it.
const (
	wordOK     = false
	wordOffset = 0
)

// word and wordOfG are never called in this build.
func word() *uintptr { panic("gls: no goroutine word in this build") }

func wordOfG(uintptr) *uintptr { panic("gls: no goroutine word in this build") }

// Current returns the calling goroutine's record, or nil: in this build,
// from the table.
func Current() *Local { return tableCurrent() }
