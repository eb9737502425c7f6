package sweep_test

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/vgpusim/vgpusim/sweep"
)

// A grid of four link speeds, each point's simulation on its own, run as
// shard 1 of 2: the last two points. Run as shard 0/2, the same program
// writes the header and the first two; the two outputs, concatenated, are
// the whole grid's.
func Example() {
	gbps := []int{1, 10, 25, 100}
	shard, err := sweep.ParseShard("1/2") // as a batch system's task index would give it
	if err != nil {
		panic(err)
	}
	rows, err := sweep.Run(context.Background(), gbps, sweep.Config{Workers: 2, Shard: shard},
		func(_ context.Context, i int, g int) ([]string, error) {
			// Stands for a simulation built from the point alone.
			seconds := 16 * 8 / float64(g) // 16 GiB over the link, roughly
			return []string{strconv.Itoa(g), strconv.FormatFloat(seconds, 'f', 2, 64)}, nil
		})
	if err != nil {
		panic(err)
	}
	if err := sweep.WriteCSV(os.Stdout, shard, []string{"link_gbps", "copy_s"}, rows); err != nil {
		panic(err)
	}
	fmt.Println(shard.Header())
	// Output:
	// 25,5.12
	// 100,1.28
	// false
}
