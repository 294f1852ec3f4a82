//go:build !race

package vtprof

// raceEnabled: the race detector slows every test down tenfold or more.
const raceEnabled = false
