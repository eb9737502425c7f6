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

// column is one column of the table: its name, units last, as every
// output prints it, and how JSON writes its cells.
type column struct {
	name string
	kind kind
}

type kind uint8

const (
	text    kind = iota
	number       // a JSON number; an empty cell is null
	boolean      // "yes" or "no"; a JSON boolean
)

var columns = []column{
	{"profile", text}, {"fb_gib", number}, {"used_gib", number}, {"mode", text},
	{"stun_s", number}, {"published_stun_s", number}, {"total_s", number},
	{"rounds", number}, {"wire_gib", number}, {"meets_1s", boolean},
	{"vm_ends_on", text}, {"outcome", text},
}

func columnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
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

// writeTable prints the rows aligned, a blank line between profiles.
func writeTable(w io.Writer, rows []row) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columnNames(), "\t"))
	for i, r := range rows {
		if i > 0 && r.profile != rows[i-1].profile {
			// A row of empty cells, not an empty line, which would end
			// tabwriter's column block.
			fmt.Fprintln(tw, strings.Repeat("\t", len(columns)-1))
		}
		f := r.fields()
		for j := range f {
			if f[j] == "" {
				f[j] = "-"
			}
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

// writeCSV writes the same table as CSV; an empty cell is an empty field.
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
			switch {
			case columns[j].kind == number && cell == "":
				b.WriteString("null")
			case columns[j].kind == number:
				b.WriteString(cell)
			case columns[j].kind == boolean:
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

// writeFile writes the table to path with write.
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
