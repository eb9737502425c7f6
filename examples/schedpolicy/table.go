package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// columns names the table's columns, units last, as both outputs print
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

// writeTable prints the rows aligned, a blank line between GPUs.
func writeTable(w io.Writer, rows []row) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for i, r := range rows {
		if i > 0 && (r.profile != rows[i-1].profile || r.policy != rows[i-1].policy || r.scenario != rows[i-1].scenario) {
			// A row of empty cells, not an empty line, which would end
			// tabwriter's column block.
			fmt.Fprintln(tw, strings.Repeat("\t", len(columns)-1))
		}
		f := r.fields()
		if f[len(f)-1] == "" {
			f[len(f)-1] = "-"
		}
		fmt.Fprintln(tw, strings.Join(f, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// writeCSV writes the same table as CSV.
func writeCSV(w io.Writer, rows []row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(columns); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(r.fields()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeJSON writes the same table as a JSON array of objects, one a row,
// keyed by the column names in column order. It is built from the CSV's
// cells, so the two cannot disagree on a digit; encoding/json's maps
// would sort the keys instead.
func writeJSON(w io.Writer, rows []row) error {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		for j, cell := range r.fields() {
			if j > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(columns[j])
			b.Write(name)
			b.WriteByte(':')
			switch {
			case numeric[columns[j]] && cell == "":
				b.WriteString("null")
			case numeric[columns[j]]:
				b.WriteString(cell)
			default:
				s, _ := json.Marshal(cell)
				b.Write(s)
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return fmt.Errorf("JSON table: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// writeFile writes the rows to path with write.
func writeFile(path string, rows []row, write func(io.Writer, []row) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f, rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
