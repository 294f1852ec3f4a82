//go:build race

package weft

// instrumented names the instrumentation this build carries, if any.
const instrumented = "-race"
