// Package sweep runs a grid of independent simulations: on the local
// cores, and one shard of the grid at a time, so that a batch system can
// spread a sweep over many machines and the shards' outputs concatenate
// into the output of the whole.
//
// # Points and determinism
//
// A sweep is a slice of points, each the parameters of one simulation.
// [Run] calls a function on every point of a [Shard] on [Config.Workers]
// goroutines and returns the results in point order, whatever order the
// goroutines ran them in. The function must make each point's result from
// that point alone: it builds its own hosts, seeds and clocks and shares
// no mutable state with the other points. That is what makes a sweep's
// results the same for any number of workers, and a shard's the same on
// any machine.
//
// # Shards
//
// A [Shard] is one of Count contiguous blocks of the points, in their
// order ([Shard.Range]); the zero Shard is the whole grid. Shard i of n
// runs the i-th block, so writing each shard's rows and concatenating the
// outputs of shards 0 to n-1, in that order, gives the whole sweep's
// output, byte for byte, provided each shard writes a header only when
// [Shard.Header] says so. [WriteCSV] follows that rule, and [WriteJSONLines]
// writes one JSON object a line with no header at all. [ParseShard] reads
// the "i/n" a batch system hands each task; a Shard is a [flag.Value],
// and [Config.RegisterFlags] adds the -shard and -workers flags to a
// command.
//
// # Batch systems
//
// A Slurm array job runs shard $SLURM_ARRAY_TASK_ID of the array's size, a
// Kubernetes Indexed Job shard $JOB_COMPLETION_INDEX of its completions,
// and GNU parallel one shard per input; each writes a file of its own, and
// the files are concatenated in shard order (0, 1, ..., 10, 11: order them
// by number, not by name).
package sweep
