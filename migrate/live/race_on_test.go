//go:build race

package live

// raceEnabled skips the tests too slow under the race detector.
const raceEnabled = true
