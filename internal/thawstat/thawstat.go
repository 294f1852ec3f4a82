// Package thawstat counts, process-wide, the thaws that found too little
// stack for the next record and grew the stack first (arch's growPinned).
// Tests compare the count before and after a workload; it is no API.
package thawstat

import "sync/atomic"

// Grown is the number of thaws that grew the stack first. It only grows.
var Grown atomic.Uint64
