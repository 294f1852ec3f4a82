//go:build go1.25 && !go1.26 && !wasm

package rt

// moduledata mirrors the prefix of runtime.moduledata in Go 1.25, up to
// textsectmap, which follows gofunc directly.
type moduledata struct {
	moduledataPrefix
	textsectmap []textsect
}
