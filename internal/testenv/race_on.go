//go:build race

package testenv

// RaceEnabled says the race detector is on: sync.Pool then drops some of what is put
// back, so allocation counts vary and a test that counts them skips.
const RaceEnabled = true
