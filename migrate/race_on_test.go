//go:build race

package migrate

// raceEnabled skips the tests too slow under the race detector.
const raceEnabled = true
