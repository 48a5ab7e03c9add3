//go:build !unix

package testenv

import "time"

// CPUTime returns the CPU time the process has used: not measured on this system, so
// it is zero and the benchmarks' CPU columns read zero.
func CPUTime() time.Duration { return 0 }
