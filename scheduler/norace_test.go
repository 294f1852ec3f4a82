//go:build !race

package scheduler

// raceEnabled: see race_test.go.
const raceEnabled = false
