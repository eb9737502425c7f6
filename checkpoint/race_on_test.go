//go:build race

package checkpoint

// raceEnabled reports a build with the race detector, under which the
// zstd decoder takes paths that allocate.
const raceEnabled = true
