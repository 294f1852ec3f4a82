//go:build !race && !msan && !asan

package weft

// instrumented names the instrumentation this build carries, if any.
const instrumented = ""
