package main

import (
	"bytes"
	"encoding/csv"
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

func writeCSVFile(path string, rows []row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeCSV(f, rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
