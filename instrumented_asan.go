//go:build asan && !race && !msan

package weft

// instrumented names the instrumentation this build carries, if any.
const instrumented = "-asan"
