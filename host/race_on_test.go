//go:build race

package host

// raceEnabled says the race detector is on: sync.Pool then drops some of what is put
// back, so allocation counts vary.
const raceEnabled = true
