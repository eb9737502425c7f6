//go:build race

package main

// raceEnabled skips the tests that run the whole table: the race detector
// makes its migrations take minutes, and TestWorkersShareNothing runs the
// few that show two simulations at once share no memory.
const raceEnabled = true
