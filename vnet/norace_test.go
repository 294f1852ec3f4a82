//go:build !race

package vnet_test

// raceEnabled: see race_test.go.
const raceEnabled = false
