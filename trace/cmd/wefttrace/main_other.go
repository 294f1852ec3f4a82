//go:build !(linux && amd64)

package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stderr, "wefttrace: Linux only (linux/amd64): it traces with uprobes and eBPF, which %s/%s does not have\n", runtime.GOOS, runtime.GOARCH)
	os.Exit(1)
}
