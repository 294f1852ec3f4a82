module github.com/weftrt/weft

go 1.25.0

require (
	github.com/google/pprof v0.0.0-20250820193118-f64d9cf942d6
	golang.org/x/net v0.55.0
	golang.org/x/sys v0.47.0
)
