//go:build !amd64 || race || msan || asan

package continuation_test

// thawShorts is always 0 on builds without the stack-copying backend,
// which thaw nothing.
func thawShorts() uint64 { return 0 }
