//go:build !linux

package scheduler

import (
	"errors"
	"runtime"
)

func checkAffinity(cpus []int) error {
	return errors.New("scheduler: CPU affinity is supported on Linux only, not " + runtime.GOOS)
}

func setAffinity(cpus ...int) (restore func() bool) { return nil }
