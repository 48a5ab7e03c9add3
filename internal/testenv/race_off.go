//go:build !race

package testenv

// RaceEnabled says the race detector is on (see race_on.go).
const RaceEnabled = false
