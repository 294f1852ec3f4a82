module github.com/weftrt/weft/trace

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	golang.org/x/arch v0.33.0
	golang.org/x/sys v0.47.0
)
