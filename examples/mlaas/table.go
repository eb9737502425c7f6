package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// kind is how JSON writes a column's cells.
type kind uint8

const (
	text   kind = iota
	number      // a JSON number; an empty cell is null
)

// column is one column of a table, its name with units last.
type column struct {
	name string
	kind kind
}

// table is rows of cells under columns: the one formatting the printed
// table, the CSV and the JSON share, so they cannot disagree on a digit.
type table struct {
	columns []column
	rows    [][]string
}

func (t table) names() []string {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	return names
}

// write prints the table aligned, "-" for an empty cell.
func (t table) write(w io.Writer) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.names(), "\t"))
	for _, r := range t.rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = c
			if c == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
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

// writeCSV writes the table as CSV; an empty cell is an empty field.
func (t table) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.names()); err != nil {
		return err
	}
	if err := cw.WriteAll(t.rows); err != nil {
		return err
	}
	return cw.Error()
}

// appendJSON appends the table as an array of objects, keys in column
// order (encoding/json's maps would sort them).
func (t table) appendJSON(b []byte) []byte {
	b = append(b, '[')
	for i, r := range t.rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, cell := range r {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, t.columns[j].name)
			b = append(b, ':')
			switch {
			case t.columns[j].kind == number && cell == "":
				b = append(b, "null"...)
			case t.columns[j].kind == number:
				b = append(b, cell...)
			default:
				s, _ := json.Marshal(cell)
				b = append(b, s...)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// writeJSON writes the named tables as one JSON object, in order.
func writeJSON(w io.Writer, names []string, tables []table) error {
	b := []byte{'{'}
	for i, t := range tables {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, names[i])
		b = append(b, ':')
		b = t.appendJSON(b)
	}
	b = append(b, '}')
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("JSON tables: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// Cell formats, one per unit.
func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
func millis(ms float64) string { return strconv.FormatFloat(ms, 'f', 2, 64) }
func perSec(r float64) string  { return strconv.FormatFloat(r, 'f', 1, 64) }
func percent(p float64) string { return strconv.FormatFloat(p, 'f', 1, 64) }
func count(n int64) string     { return strconv.FormatInt(n, 10) }
