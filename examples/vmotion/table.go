package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/vgpusim/vgpusim/examples/tabular"
	"github.com/vgpusim/vgpusim/sweep"
)

// columns are the file outputs' (-csv, -json), units last: one row a
// migration, its table column saying which of the three tables it belongs
// to. An empty number cell is null in the JSON. The post-copy degradation
// columns come last, so that the columns before them keep their places.
var columns = []tabular.Column{
	{Name: "table"}, {Name: "profile"},
	{Name: "fb_gib", Kind: tabular.Number}, {Name: "used_gib", Kind: tabular.Number},
	{Name: "mode"}, {Name: "preset"},
	{Name: "stun_s", Kind: tabular.Number}, {Name: "published_stun_s", Kind: tabular.Number},
	{Name: "stun_error_pct", Kind: tabular.Number}, {Name: "expected_stun_s", Kind: tabular.Number},
	{Name: "total_s", Kind: tabular.Number}, {Name: "rounds", Kind: tabular.Number},
	{Name: "wire_gib", Kind: tabular.Number}, {Name: "meets_1s", Kind: tabular.Bool},
	{Name: "vm_ends_on"}, {Name: "outcome"},
	{Name: colWindow, Kind: tabular.Number}, {Name: "faults", Kind: tabular.Number},
	{Name: "fault_p50_ms", Kind: tabular.Number}, {Name: "fault_p99_ms", Kind: tabular.Number},
	{Name: "stall_s", Kind: tabular.Number},
}

// colWindow is the column of the post-copy degradation window.
const colWindow = "postcopy_window_s"

func columnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.Name
	}
	return names
}

// The printed tables' columns: each a view of the rows' cells. The V100
// table shows each size's fb-precopy stun (the stun_s of its pre-copy row)
// in a column of its own, beside the Legacy row.
var (
	printedProfiles = []string{"profile", "fb_gib", "used_gib", "mode", "stun_s", "total_s", "rounds", "wire_gib", "meets_1s",
		colWindow, "faults", "fault_p50_ms", "fault_p99_ms", "stall_s", "vm_ends_on", "outcome"}
	printedPublished = []string{"used_gib", "profile", "published_stun_s", "stun_s", "stun_error_pct"}
	printedV100      = []string{"profile", "fb_gib", "used_gib", "published_stun_s", "stun_s", "stun_error_pct", colPreCopyStun, "expected_stun_s"}
)

// colPreCopyStun is the printed V100 table's column of the fb-precopy stun.
const colPreCopyStun = "precopy_stun_s"

// formatSeconds formats d in seconds to the given resolution's digits: "9.0" for
// tenths, "5" for whole seconds.
func formatSeconds(d, resolution time.Duration) string {
	digits := 3
	if resolution > 0 {
		digits = max(0, int(math.Ceil(-math.Log10(resolution.Seconds())-1e-9)))
	}
	return strconv.FormatFloat(d.Seconds(), 'f', digits, 64)
}

// formatMillis formats d in milliseconds, to the microsecond.
func formatMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// cells are the row's cells by column name: the one formatting every
// output shares. A migration that did not run has no stun, time, rounds,
// bytes or degradation; one without a fault has no fault latency; a row
// without a published figure has none, nor an error.
func (r row) cells() map[string]string {
	gib := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 3, 64) }
	c := map[string]string{
		"table": r.table, "profile": r.profile, "fb_gib": strconv.FormatInt(r.fbBytes>>30, 10),
		"used_gib": gib(r.usedBytes), "mode": r.mode.String(), "preset": r.preset,
		"meets_1s": "no", "vm_ends_on": r.endsOn, "outcome": r.outcome,
	}
	if r.outcome == outcomeMoved {
		c["stun_s"] = formatSeconds(r.stun, 0)
		c["total_s"] = formatSeconds(r.total, 0)
		c["rounds"] = strconv.Itoa(r.rounds)
		c["wire_gib"] = gib(r.wireBytes)
		// Zero unless the VM ran at the destination before its pages
		// had all come: a Legacy or PreCopy VM resumes with every page.
		c[colWindow] = formatSeconds(r.window, 0)
		c["faults"] = strconv.FormatInt(r.faults, 10)
		c["stall_s"] = formatSeconds(r.stall, 0)
		if r.faults > 0 {
			c["fault_p50_ms"] = formatMillis(r.faultP50)
			c["fault_p99_ms"] = formatMillis(r.faultP99)
		}
	}
	if r.published > 0 {
		// As published: to its rounding.
		c["published_stun_s"] = formatSeconds(r.published, r.resolution)
	}
	if pct, ok := r.errorPct(); ok {
		c["stun_error_pct"] = strconv.FormatFloat(pct, 'f', 2, 64)
	}
	if r.expected > 0 {
		c["expected_stun_s"] = formatSeconds(r.expected, r.expectedResolution)
	}
	if r.meets {
		c["meets_1s"] = "yes"
	}
	if r.outcome == outcomeRefused {
		c["outcome"] = fmt.Sprintf("refused: estimated stun %.1f s over the %.0f s limit", r.estimate.Seconds(), r.limit.Seconds())
	}
	return c
}

// fields are the row's cells in the file outputs' column order.
func (r row) fields() []string {
	c := r.cells()
	out := make([]string, len(columns))
	for i, col := range columns {
		out[i] = c[col.Name]
	}
	return out
}

// newTable is every row in the file outputs' columns: "-" for an empty
// cell.
func newTable(rows []row) *tabular.Table {
	t := &tabular.Table{Columns: columns, Blank: "-"}
	for _, r := range rows {
		t.Add(r.fields()...)
	}
	return t
}

// printedTable is one table's rows as printed: the columns names, "-" for
// an empty cell. The sweep sets each profile apart with a blank line; the
// V100 table folds each size's pre-copy row into its Legacy row, or shows
// it alone when a shard's rows start with it.
func printedTable(rows []row, table string, names []string) *tabular.Table {
	var lines []map[string]string
	for _, r := range rows {
		if r.table != table {
			continue
		}
		c := r.cells()
		if table == tableV100 && r.mode != modes[0] {
			if n := len(lines); n > 0 && lines[n-1]["profile"] == r.profile {
				lines[n-1][colPreCopyStun] = c["stun_s"]
				continue
			}
			// A shard's first row, its Legacy row in the shard before.
			c[colPreCopyStun], c["stun_s"] = c["stun_s"], ""
		}
		lines = append(lines, c)
	}
	t := &tabular.Table{Blank: "-"}
	for _, n := range names {
		t.Columns = append(t.Columns, tabular.Column{Name: n})
	}
	for i, c := range lines {
		if table == tableProfiles && i > 0 && c["profile"] != lines[i-1]["profile"] {
			t.Break()
		}
		cells := make([]string, len(names))
		for j, n := range names {
			cells[j] = c[n]
		}
		t.Add(cells...)
	}
	return t
}

// writeCSV writes the rows as CSV, an empty cell an empty field, after
// the header if shard s writes it: the files of the shards, concatenated
// in order, are the whole sweep's.
func writeCSV(w io.Writer, rows []row, s sweep.Shard) error {
	return newTable(rows).WriteShardCSV(w, s)
}

// writeJSON writes the same rows as JSON Lines, one object a line, keyed
// by the column names in column order, built from the CSV's cells; with
// no header, the shards' files concatenate too.
func writeJSON(w io.Writer, rows []row) error { return newTable(rows).WriteJSONLines(w) }
