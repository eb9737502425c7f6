package main

import (
	"strconv"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

// newTable is a table under cols, "-" for an empty cell in print; an
// empty number cell is null in the JSON.
func newTable(cols ...tabular.Column) *tabular.Table {
	return &tabular.Table{Columns: cols, Blank: "-"}
}

// text is a column of strings.
func text(name string) tabular.Column { return tabular.Column{Name: name} }

// number is a column of numbers.
func number(name string) tabular.Column { return tabular.Column{Name: name, Kind: tabular.Number} }

// Cell formats, one per unit.
func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
func millis(ms float64) string { return strconv.FormatFloat(ms, 'f', 2, 64) }
func perSec(r float64) string  { return strconv.FormatFloat(r, 'f', 1, 64) }
func percent(p float64) string { return strconv.FormatFloat(p, 'f', 1, 64) }
func count(n int64) string     { return strconv.FormatInt(n, 10) }
