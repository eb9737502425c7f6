package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

// columns are the table's, units last, as every output prints them. An
// empty number cell is null in the JSON.
var columns = []tabular.Column{
	{Name: "profile"}, {Name: "fb_gib", Kind: tabular.Number}, {Name: "used_gib", Kind: tabular.Number},
	{Name: "mode"}, {Name: "stun_s", Kind: tabular.Number}, {Name: "published_stun_s", Kind: tabular.Number},
	{Name: "total_s", Kind: tabular.Number}, {Name: "rounds", Kind: tabular.Number},
	{Name: "wire_gib", Kind: tabular.Number}, {Name: "meets_1s", Kind: tabular.Bool},
	{Name: "vm_ends_on"}, {Name: "outcome"},
}

func columnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.Name
	}
	return names
}

// fields are the row's cells, in column order: the one formatting every
// output shares. A migration that did not run has no stun, time, rounds
// or bytes; a row without a published figure has none.
func (r row) fields() []string {
	gib := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 3, 64) }
	var stun, published, total, rounds, wire string
	if r.outcome == outcomeMoved {
		stun = strconv.FormatFloat(r.stun.Seconds(), 'f', 3, 64)
		total = strconv.FormatFloat(r.total.Seconds(), 'f', 3, 64)
		rounds = strconv.Itoa(r.rounds)
		wire = gib(r.wireBytes)
	}
	if r.published > 0 {
		// As published: tenths of a second.
		published = strconv.FormatFloat(r.published.Seconds(), 'f', 1, 64)
	}
	meets := "no"
	if r.meets {
		meets = "yes"
	}
	outcome := r.outcome
	if r.outcome == outcomeRefused {
		outcome = fmt.Sprintf("refused: estimated stun %.1f s over the %.0f s limit", r.estimate.Seconds(), limit.Seconds())
	}
	return []string{
		r.profile, strconv.FormatInt(r.fbBytes>>30, 10), gib(r.usedBytes), r.mode.String(),
		stun, published, total, rounds, wire, meets, r.endsOn, outcome,
	}
}

// newTable is the rows' table: "-" for an empty cell in print, a blank line
// between profiles.
func newTable(rows []row) *tabular.Table {
	t := &tabular.Table{Columns: columns, Blank: "-"}
	for i, r := range rows {
		if i > 0 && r.profile != rows[i-1].profile {
			t.Break()
		}
		t.Add(r.fields()...)
	}
	return t
}

// writeTable prints the rows aligned.
func writeTable(w io.Writer, rows []row) error { return newTable(rows).WriteText(w) }

// writeCSV writes the same table as CSV; an empty cell is an empty field.
func writeCSV(w io.Writer, rows []row) error { return newTable(rows).WriteCSV(w) }

// writeJSON writes the same table as a JSON array of objects, one a row,
// keyed by the column names in column order, built from the CSV's cells.
func writeJSON(w io.Writer, rows []row) error { return newTable(rows).WriteJSON(w) }
