//go:build !race

package vgpu

// isolationRace is whether the race detector is on; the isolation tests
// shrink their costliest cases under it, and the remote GPU tests skip
// their figures.
const isolationRace = false
