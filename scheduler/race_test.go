//go:build race

package scheduler

// raceEnabled: the race detector makes the largest tests (a million
// virtual threads, a million messages) take minutes, so they run at their
// -short sizes under it.
const raceEnabled = true
