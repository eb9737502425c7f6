package main

import (
	"io"
	"strconv"
	"time"

	"github.com/vgpusim/vgpusim/examples/tabular"
	"github.com/vgpusim/vgpusim/sweep"
)

// columns: the migration, then the workload (frames or requests) over the
// second before the VM's migration started, during it and over the second
// after it ended. FileOnly columns go to the CSV and JSON but not to the
// printed table, which stays narrow enough to read.
var columns = []tabular.Column{
	{Name: "profile"}, {Name: "mode"}, {Name: "schedule"}, {Name: "vm"},
	number("start_s", false), number("end_s", true), number("total_s", false), number("stun_s", false),
	{Name: "meets_1s", Kind: tabular.Bool}, number("rounds", true), number("wire_gib", true),
	number("before_per_s", false), number("during_per_s", false), number("after_per_s", true),
	number("before_mean_ms", true), number("during_mean_ms", true), number("after_mean_ms", true),
	number("before_p99_ms", false), number("during_p99_ms", false), number("after_p99_ms", false),
	number("before_max_ms", true), number("during_max_ms", true), number("after_max_ms", true),
}

// number is a number column, in the printed table unless fileOnly.
func number(name string, fileOnly bool) tabular.Column {
	return tabular.Column{Name: name, Kind: tabular.Number, FileOnly: fileOnly}
}

func columnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.Name
	}
	return names
}

// fields are the row's cells, in column order: the one formatting every
// output shares.
func (r row) fields() []string {
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }
	perSec := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	meets := "no"
	if r.meets {
		meets = "yes"
	}
	return []string{
		r.profile, r.mode.String(), r.schedule, r.vm,
		sec(r.start), sec(r.end), sec(r.total), sec(r.stun),
		meets, strconv.Itoa(r.rounds), strconv.FormatFloat(float64(r.wireBytes)/(1<<30), 'f', 3, 64),
		perSec(r.before.ThroughputPerSec), perSec(r.during.ThroughputPerSec), perSec(r.after.ThroughputPerSec),
		ms(r.before.LatencyMean), ms(r.during.LatencyMean), ms(r.after.LatencyMean),
		ms(r.before.LatencyP99), ms(r.during.LatencyP99), ms(r.after.LatencyP99),
		ms(r.before.LatencyMax), ms(r.during.LatencyMax), ms(r.after.LatencyMax),
	}
}

// newTable is the rows' table, a blank line between groups. Every cell
// is measured, so an empty number is an error, not null.
func newTable(rows []row) *tabular.Table {
	t := &tabular.Table{Columns: columns, NoNull: true}
	for i, r := range rows {
		if i > 0 && (r.profile != rows[i-1].profile || r.mode != rows[i-1].mode || r.schedule != rows[i-1].schedule) {
			t.Break()
		}
		t.Add(r.fields()...)
	}
	return t
}

// writeTable prints the rows aligned.
func writeTable(w io.Writer, rows []row) error { return newTable(rows).WriteText(w) }

// writeCSV writes the same table as CSV, after the header if shard s
// writes it: the files of the shards, concatenated in order, are the
// whole sweep's.
func writeCSV(w io.Writer, rows []row, s sweep.Shard) error {
	return newTable(rows).WriteShardCSV(w, s)
}

// writeJSON writes the same table as JSON Lines, one object a row, keyed
// by the column names in column order, built from the CSV's cells; with
// no header, the shards' files concatenate too.
func writeJSON(w io.Writer, rows []row) error { return newTable(rows).WriteJSONLines(w) }
