//go:build race

package main

// raceEnabled shrinks the tests' runs: the program starts no goroutine, so
// the race detector has nothing to find in a long run, and it makes every
// simulated second many times slower.
const raceEnabled = true
