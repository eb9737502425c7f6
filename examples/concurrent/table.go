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
	"time"
)

// column is one column of the table: its name, units last, as every
// output prints it, and how JSON writes its cells.
type column struct {
	name string
	kind kind
	// fileOnly columns go to the CSV and JSON but not to the printed
	// table, which stays narrow enough to read.
	fileOnly bool
}

type kind uint8

const (
	text    kind = iota
	number       // a JSON number
	boolean      // "yes" or "no"; a JSON boolean
)

// columns: the migration, then the workload (frames or requests) over the
// second before the VM's migration started, during it and over the second
// after it ended.
var columns = []column{
	{"profile", text, false}, {"mode", text, false}, {"schedule", text, false}, {"vm", text, false},
	{"start_s", number, false}, {"end_s", number, true}, {"total_s", number, false}, {"stun_s", number, false},
	{"meets_1s", boolean, false}, {"rounds", number, true}, {"wire_gib", number, true},
	{"before_per_s", number, false}, {"during_per_s", number, false}, {"after_per_s", number, true},
	{"before_mean_ms", number, true}, {"during_mean_ms", number, true}, {"after_mean_ms", number, true},
	{"before_p99_ms", number, false}, {"during_p99_ms", number, false}, {"after_p99_ms", number, false},
	{"before_max_ms", number, true}, {"during_max_ms", number, true}, {"after_max_ms", number, true},
}

func columnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
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

// printed keeps the cells of the columns the printed table shows.
func printed(cells []string) []string {
	var out []string
	for i, c := range columns {
		if !c.fileOnly {
			out = append(out, cells[i])
		}
	}
	return out
}

// writeTable prints the rows aligned, a blank line between groups.
func writeTable(w io.Writer, rows []row) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	header := printed(columnNames())
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i, r := range rows {
		if i > 0 && (r.profile != rows[i-1].profile || r.mode != rows[i-1].mode || r.schedule != rows[i-1].schedule) {
			// A row of empty cells, not an empty line, which would end
			// tabwriter's column block.
			fmt.Fprintln(tw, strings.Repeat("\t", len(header)-1))
		}
		fmt.Fprintln(tw, strings.Join(printed(r.fields()), "\t"))
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
	if err := cw.Write(columnNames()); err != nil {
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
// keyed by the column names in column order. It is built from the same
// cells as the CSV, so the two cannot disagree on a digit; encoding/json's
// maps would sort the keys instead.
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
			name, _ := json.Marshal(columns[j].name)
			b.Write(name)
			b.WriteByte(':')
			switch columns[j].kind {
			case number:
				b.WriteString(cell)
			case boolean:
				b.WriteString(strconv.FormatBool(cell == "yes"))
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

// writeFile creates path and writes to it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
