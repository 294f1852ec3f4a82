module github.com/weftrt/weft/trace

go 1.25.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/google/pprof v0.0.0-20250820193118-f64d9cf942d6
	golang.org/x/arch v0.30.0
	golang.org/x/sys v0.47.0
)
