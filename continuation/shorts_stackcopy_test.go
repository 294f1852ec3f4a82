//go:build amd64 && !race && !msan && !asan

package continuation_test

import "github.com/weftrt/weft/arch"

// thawShorts is how many thaws in this process found too little stack and
// grew it first (arch.Shorts), on builds with the stack-copying backend.
func thawShorts() uint64 { return arch.Shorts() }
