//go:build unix

package testenv

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time the process has used, user and system, all threads:
// what benchmarks report beside their time, since other jobs on a shared machine
// disturb it less. It is zero where it is not measured.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
