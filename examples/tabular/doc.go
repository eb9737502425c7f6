// Package tabular writes one table of text cells three ways: as aligned
// text for the terminal, as CSV and as JSON. It is the table machinery
// the examples vmotion, concurrent, schedpolicy, mlaas, maintenance and
// remotegpu share, and their -csv flag ([CSVFlag], [ParseFlags]).
//
// A [Table] is [Column]s and rows of cells, one string a cell, formatted
// once by the caller: every output is built from the same cells, so the
// printed table, the CSV and the JSON cannot disagree on a digit.
//
//   - [Table.WriteText] aligns the columns with text/tabwriter (two spaces
//     between them), trims the spaces that would end a line, leaves out
//     the [Column.FileOnly] columns, prints [Table.Blank] for an empty
//     cell and an empty line before each row listed in [Table.Breaks].
//   - [Table.WriteCSV] writes the header and the rows with encoding/csv;
//     an empty cell is an empty field.
//   - [Table.WriteJSON] writes an array of objects, one a row, keyed by
//     the column names in column order (encoding/json's maps would sort
//     the keys), indented by two spaces. A [Text] cell is a string, a
//     [Number] cell is written as it stands, a [Bool] cell is true if it
//     is "yes" and false otherwise. [WriteJSONObject] writes several
//     named tables as one object.
//   - [Table.WriteJSONLines] writes the same objects as JSON Lines, one a
//     line, compact.
//
// The examples that sweep (vmotion, mlaas, concurrent) run one shard of
// their grid with -shard i/n (package sweep): [Table.WriteShardCSV]
// writes a shard's rows with the header only in shard 0's file, and JSON
// Lines has no header, so the shards' files concatenate, in shard order,
// into the whole sweep's. The rule which shard writes the header, and the
// writers that follow it, are package sweep's; the cells are this
// package's.
//
// Where the examples differ, a field of the Table keeps each one's own
// behaviour:
//
//   - An empty [Number] cell is null (vmotion, schedpolicy, mlaas); with
//     [Table.NoNull] it is an error instead (concurrent, all of whose
//     number cells are measured, so an empty one is a bug).
//   - [Table.Blank] is "-" in vmotion, schedpolicy and mlaas; concurrent
//     leaves it empty (it has no empty cells).
//   - [Table.Breaks] separates groups of rows in vmotion, concurrent and
//     schedpolicy; mlaas has none.
//   - Only concurrent has [Column.FileOnly] columns.
//
// [WriteFile] creates a file and writes it with any of the writers.
package tabular
