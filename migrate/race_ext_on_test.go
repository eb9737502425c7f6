//go:build race

package migrate_test

// raceDetector shortens the external tests too slow under the race
// detector.
const raceDetector = true
