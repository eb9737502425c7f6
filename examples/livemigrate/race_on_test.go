//go:build race

package main

// raceEnabled makes the migrations smaller: the race detector slows the
// host's page writes several times over, and a host that cannot keep up
// with wall time falls further behind at every tick.
const raceEnabled = true
