package tabular

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/vgpusim/vgpusim/sweep"
)

// Kind is how the JSON writes a column's cells.
type Kind uint8

const (
	// Text cells are JSON strings.
	Text Kind = iota
	// Number cells are JSON numbers, written as they stand; an empty
	// cell is null unless the table's NoNull is set.
	Number
	// Bool cells are "yes" or "no", JSON true or false.
	Bool
)

// Column is one column of a table.
type Column struct {
	// Name heads the column in every output, units last.
	Name string
	// Kind is how JSON writes the column's cells.
	Kind Kind
	// FileOnly columns go to the CSV and the JSON but not to the text
	// table, which stays narrow enough to read.
	FileOnly bool
}

// Table is rows of cells under columns. Every row has one cell a column.
type Table struct {
	Columns []Column
	Rows    [][]string
	// Breaks are the indices of the rows the text table sets apart from
	// the rows above them with a row of empty cells (an empty line once
	// trimmed), in ascending order.
	Breaks []int
	// Blank is what the text table prints for an empty cell.
	Blank string
	// NoNull makes an empty Number cell an error in the JSON rather
	// than null.
	NoNull bool
}

// Add appends a row of cells.
func (t *Table) Add(cells ...string) {
	t.Rows = append(t.Rows, cells)
}

// Break sets the next row added apart from the rows above it in the text
// table.
func (t *Table) Break() {
	t.Breaks = append(t.Breaks, len(t.Rows))
}

// Names returns the names of all the columns, in order.
func (t *Table) Names() []string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return names
}

// check reports a row whose cells do not match the columns.
func (t *Table) check() error {
	for i, r := range t.Rows {
		if len(r) != len(t.Columns) {
			return fmt.Errorf("table row %d has %d cells for %d columns", i+1, len(r), len(t.Columns))
		}
	}
	return nil
}

// printed keeps the cells of the columns the text table shows.
func (t *Table) printed(cells []string) []string {
	out := make([]string, 0, len(cells))
	for i, c := range t.Columns {
		if c.FileOnly {
			continue
		}
		if cells[i] == "" {
			out = append(out, t.Blank)
		} else {
			out = append(out, cells[i])
		}
	}
	return out
}

// WriteText writes the table aligned, without the FileOnly columns,
// Blank for an empty cell and an empty line before each of the Breaks.
// No line ends in a space.
func (t *Table) WriteText(w io.Writer) error {
	if err := t.check(); err != nil {
		return err
	}
	var header []string
	for _, c := range t.Columns {
		if !c.FileOnly {
			header = append(header, c.Name)
		}
	}
	breaks := make(map[int]bool, len(t.Breaks))
	for _, i := range t.Breaks {
		breaks[i] = true
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i, r := range t.Rows {
		if breaks[i] {
			// A row of empty cells, not an empty line, which would end
			// tabwriter's column block.
			fmt.Fprintln(tw, strings.Repeat("\t", len(header)-1))
		}
		fmt.Fprintln(tw, strings.Join(t.printed(r), "\t"))
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

// WriteCSV writes the header and the rows as CSV, every column included;
// an empty cell is an empty field.
func (t *Table) WriteCSV(w io.Writer) error { return t.WriteShardCSV(w, sweep.Shard{}) }

// WriteShardCSV writes the rows as CSV, as WriteCSV does, after the header
// only if shard s writes it (sweep.Shard.Header): the files of a sweep's
// shards, each with that shard's rows, concatenate into the whole sweep's.
func (t *Table) WriteShardCSV(w io.Writer, s sweep.Shard) error {
	if err := t.check(); err != nil {
		return err
	}
	return sweep.WriteCSV(w, s, t.Names(), t.Rows)
}

// appendJSON appends the table as a JSON array of objects, unindented.
func (t *Table) appendJSON(b []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	b = append(b, '[')
	for i := range t.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = t.appendObject(b, i); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendObject appends row i as a JSON object, unindented.
func (t *Table) appendObject(b []byte, i int) ([]byte, error) {
	b = append(b, '{')
	for j, cell := range t.Rows[i] {
		if j > 0 {
			b = append(b, ',')
		}
		c := t.Columns[j]
		b = appendString(b, c.Name)
		b = append(b, ':')
		switch {
		case c.Kind == Number && cell == "" && t.NoNull:
			return nil, fmt.Errorf("row %d: empty number %s", i+1, c.Name)
		case c.Kind == Number && cell == "":
			b = append(b, "null"...)
		case c.Kind == Number:
			b = append(b, cell...)
		case c.Kind == Bool && cell == "yes":
			b = append(b, "true"...)
		case c.Kind == Bool:
			b = append(b, "false"...)
		default:
			b = appendString(b, cell)
		}
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// writeIndented indents the JSON in b by two spaces and writes it with a
// newline after it. An invalid number cell fails here.
func writeIndented(w io.Writer, b []byte, what string) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// WriteJSON writes the table as a JSON array of objects, one a row, keyed
// by the column names in column order, indented by two spaces.
func (t *Table) WriteJSON(w io.Writer) error {
	b, err := t.appendJSON(nil)
	if err != nil {
		return fmt.Errorf("JSON table: %w", err)
	}
	return writeIndented(w, b, "JSON table")
}

// WriteJSONLines writes the table as JSON Lines: each row an object, keyed
// and valued as WriteJSON's, compact, on a line of its own (with
// sweep.WriteJSONLines). With no header, the files of a sweep's shards
// concatenate into the whole sweep's.
func (t *Table) WriteJSONLines(w io.Writer) error {
	if err := t.check(); err != nil {
		return fmt.Errorf("JSON lines: %w", err)
	}
	lines := make([]json.RawMessage, len(t.Rows))
	for i := range t.Rows {
		var err error
		if lines[i], err = t.appendObject(nil, i); err != nil {
			return fmt.Errorf("JSON lines: %w", err)
		}
	}
	if err := sweep.WriteJSONLines(w, lines); err != nil {
		return fmt.Errorf("JSON lines: %w", err)
	}
	return nil
}

// WriteJSONObject writes the tables as one JSON object, each table's
// array under its name, in order, indented by two spaces.
func WriteJSONObject(w io.Writer, names []string, tables []*Table) error {
	if len(names) != len(tables) {
		return fmt.Errorf("JSON tables: %d names for %d tables", len(names), len(tables))
	}
	b := []byte{'{'}
	for i, t := range tables {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, names[i])
		b = append(b, ':')
		var err error
		if b, err = t.appendJSON(b); err != nil {
			return fmt.Errorf("JSON tables: %s: %w", names[i], err)
		}
	}
	return writeIndented(w, append(b, '}'), "JSON tables")
}

// WriteFile creates the file path, writes it with write and closes it.
func WriteFile(path string, write func(io.Writer) error) error {
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
