package sweep

import (
	"encoding/csv"
	"encoding/json"
	"io"
)

// WriteCSV writes a shard's rows as CSV, after the header if the shard
// writes it (Shard.Header): the CSV files of shards 0 to n-1, concatenated
// in order, are the whole sweep's. An empty field is an empty cell.
func WriteCSV(w io.Writer, s Shard, header []string, rows [][]string) error {
	cw := csv.NewWriter(w)
	if s.Header() {
		if err := cw.Write(header); err != nil {
			return err
		}
	}
	return cw.WriteAll(rows)
}

// WriteJSONLines writes rows as JSON Lines: each row encoded by
// encoding/json, compact, on a line of its own. With no header, the files
// of shards 0 to n-1, concatenated in order, are the whole sweep's. A row
// that is a json.RawMessage is written as it stands, compacted.
func WriteJSONLines[R any](w io.Writer, rows []R) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
