// Package tablecheck holds the checks the examples' tests make of the
// tables they write (package tabular): the CSV read back by column name,
// and the JSON Lines held to the CSV cell by cell.
package tablecheck

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

// Rows reads a CSV into one map per row, keyed by column name, after
// checking that its header is header.
func Rows(t testing.TB, b []byte, header []string) []map[string]string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], header) {
		t.Fatalf("CSV header %v, want %v", recs, header)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, v := range rec {
			m[recs[0][i]] = v
		}
		rows = append(rows, m)
	}
	return rows
}

// Number parses a cell that must be a number.
func Number(t testing.TB, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return v
}

// JSONLines checks that jsonl is the table of columns that csv holds: one
// object a row, each line ended, keys in column order each followed by
// one scalar, numbers equal to the CSV's (null where the CSV cell is
// empty), "yes"/"no" as booleans, text as strings.
func JSONLines(t testing.TB, columns []tabular.Column, csv, jsonl []byte) {
	t.Helper()
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.Name
	}
	rows := Rows(t, csv, names)
	lines := strings.SplitAfter(string(jsonl), "\n")
	if lines[len(lines)-1] != "" || len(lines)-1 != len(rows) {
		t.Fatalf("JSON has %d lines, the CSV %d rows; want one a row, each ended", len(lines)-1, len(rows))
	}
	for i, r := range rows {
		line := lines[i]
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if keys := keysInOrder(t, line); !slices.Equal(keys, names) {
			t.Fatalf("line %d: JSON keys %v, want %v", i+1, keys, names)
		}
		for _, c := range columns {
			got, cell := obj[c.Name], r[c.Name]
			var ok bool
			switch {
			case c.Kind == tabular.Number && cell == "":
				ok = got == nil
			case c.Kind == tabular.Number:
				f, isNum := got.(float64)
				ok = isNum && f == Number(t, cell)
			case c.Kind == tabular.Bool:
				b, isBool := got.(bool)
				ok = isBool && b == (cell == "yes")
			default:
				ok = got == cell
			}
			if !ok {
				t.Errorf("row %d %s: JSON %v, CSV %q", i+1, c.Name, got, cell)
			}
		}
	}
}

// keysInOrder returns the keys of the JSON object on line as written,
// which a map loses, checking each is followed by one scalar value.
func keysInOrder(t testing.TB, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	token := func() json.Token {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if token() != json.Delim('{') {
		t.Fatalf("%q is not an object", line)
	}
	var keys []string
	for dec.More() {
		k, ok := token().(string)
		if !ok {
			t.Fatal("JSON object key is not a string")
		}
		keys = append(keys, k)
		if _, isDelim := token().(json.Delim); isDelim {
			t.Fatalf("key %s holds an object or array, not a scalar", k)
		}
	}
	return keys
}
