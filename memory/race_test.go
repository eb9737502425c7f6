//go:build race

package memory

// raceEnabled is set when the tests run under the race detector, which
// makes the scale tests take minutes instead of seconds.
const raceEnabled = true
