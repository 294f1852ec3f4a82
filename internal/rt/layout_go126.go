//go:build go1.26 && !go1.27 && !wasm

package rt

// moduledata mirrors the prefix of runtime.moduledata in Go 1.26, up to
// textsectmap: Go 1.26 added epclntab after gofunc.
type moduledata struct {
	moduledataPrefix
	epclntab    uintptr
	textsectmap []textsect
}
