//go:build amd64 && !race && !msan && !asan

package continuation_test

import "github.com/weftrt/weft/internal/thawstat"

// thawShorts is how many thaws in this process found too little stack and
// grew it first (thawstat.Grown), on builds with the stack-copying backend.
func thawShorts() uint64 { return thawstat.Grown.Load() }
