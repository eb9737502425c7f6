package main

import (
	"io"
	"strconv"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

// columns names the table's columns, units last, as every output prints
// them.
var columns = []string{
	"scenario", "policy", "profile", "vms_per_gpu", "vm", "role",
	"gpu_util_pct", "vm_gpu_time_pct", "training_time_s",
}

// numeric marks the columns JSON writes as numbers; an empty cell (a
// neighbour's training time) is null.
var numeric = map[string]bool{
	"vms_per_gpu": true, "vm": true, "gpu_util_pct": true, "vm_gpu_time_pct": true, "training_time_s": true,
}

func (r row) fields() []string {
	training := ""
	if r.trainingS > 0 {
		training = strconv.FormatFloat(r.trainingS, 'f', 3, 64)
	}
	return []string{
		r.scenario, r.policy.String(), r.profile, strconv.Itoa(r.vms), strconv.Itoa(r.vm), r.role,
		strconv.FormatFloat(r.gpuUtilPct, 'f', 1, 64),
		strconv.FormatFloat(r.vmGPUPct, 'f', 1, 64),
		training,
	}
}

// newTable is the rows' table: "-" for a neighbour's missing training
// time in print, a blank line between GPUs.
func newTable(rows []row) *tabular.Table {
	t := &tabular.Table{Blank: "-"}
	for _, name := range columns {
		kind := tabular.Text
		if numeric[name] {
			kind = tabular.Number
		}
		t.Columns = append(t.Columns, tabular.Column{Name: name, Kind: kind})
	}
	for i, r := range rows {
		if i > 0 && (r.profile != rows[i-1].profile || r.policy != rows[i-1].policy || r.scenario != rows[i-1].scenario) {
			t.Break()
		}
		t.Add(r.fields()...)
	}
	return t
}

// writeTable prints the rows aligned.
func writeTable(w io.Writer, rows []row) error { return newTable(rows).WriteText(w) }

// writeCSV writes the same table as CSV.
func writeCSV(w io.Writer, rows []row) error { return newTable(rows).WriteCSV(w) }

// writeJSON writes the same table as a JSON array of objects, one a row,
// keyed by the column names in column order, built from the CSV's cells.
func writeJSON(w io.Writer, rows []row) error { return newTable(rows).WriteJSON(w) }
