//go:build race

package main

// raceEnabled shrinks the runs the tests make: the program starts no
// goroutine, so the race detector has nothing to find there, and it makes
// each migration many times slower.
const raceEnabled = true
