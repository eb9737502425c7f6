//go:build race

package main

// raceEnabled skips the tests that run the whole table: the program starts
// no goroutine, so the race detector has nothing to find there, and it makes
// the sixteen migrations take minutes.
const raceEnabled = true
