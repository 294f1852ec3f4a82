//go:build race

package vnet_test

// raceEnabled: under the race detector sync.Pool drops some of what is
// put back, on purpose, so allocation counts differ.
const raceEnabled = true
