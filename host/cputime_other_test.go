//go:build !unix

package host

import (
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used: not measured here, so the cold
// start's CPU column reads zero.
func cpuTime(*testing.B) time.Duration { return 0 }
