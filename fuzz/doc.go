// Package fuzz holds fuzz targets that cross package boundaries: whole live
// migration streams fed to a destination, hostile device checkpoints
// restored through the path a migration takes, and the host operations
// around them. Fuzz targets that exercise one package stay beside it
// (checkpoint's FuzzReader, vgpu's FuzzRestoreState, migrate's
// FuzzReceive); the targets here go through the public API only, the way
// a user of the library would.
//
// The package has no code of its own: everything is in its tests. Run one
// target with
//
//	go test -run '^$' -fuzz '^FuzzX$' -fuzztime 30s ./fuzz
//
// where FuzzX is the target's name. Without -fuzz, go test runs every
// target on its seed corpus as a plain test. A crasher the fuzzer finds is
// written under testdata/fuzz/FuzzX; it is committed there as a regression
// input, which every later go test replays.
//
// FuzzMigrationStream and FuzzDeviceRestore start from generated seeds:
// live migrations recorded through Send and Receive, and device states
// saved from running vGPUs, with mutants of them. The small ones are also
// committed under testdata/fuzz; TestMigrationStreamSeeds and
// TestDeviceRestoreSeeds fail when a committed file differs from what its
// generator makes now, and rewrite the files with -update-seeds:
//
//	go test -run 'TestMigrationStreamSeeds|TestDeviceRestoreSeeds' ./fuzz -update-seeds
//
// The fuzzer minimizes every input that widens coverage before it goes
// on, for up to a minute each by default. With inputs of kilobytes and
// executions of milliseconds, a short run spends most of its time there;
// -fuzzminimizetime 10x keeps it fuzzing.
package fuzz
