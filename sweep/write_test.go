package sweep

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The shards' CSV and JSON Lines, concatenated in order, are the whole
// grid's, however many shards and whatever their sizes.
func TestWritersConcatenate(t *testing.T) {
	header := []string{"name", "note"}
	var rows [][]string
	for _, n := range []string{"a", "b,c", `say "hi"`, "", "e"} {
		rows = append(rows, []string{n, n + "!"})
	}
	type obj struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	var objs []obj
	for i, r := range rows {
		objs = append(objs, obj{r[0], i})
	}
	var wholeCSV, wholeJSON bytes.Buffer
	if err := WriteCSV(&wholeCSV, Shard{}, header, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSONLines(&wholeJSON, objs); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(wholeJSON.Bytes(), []byte("\n")); got != len(objs) {
		t.Errorf("%d lines of JSON for %d rows", got, len(objs))
	}
	for _, line := range bytes.Split(bytes.TrimSuffix(wholeJSON.Bytes(), []byte("\n")), []byte("\n")) {
		if !json.Valid(line) {
			t.Errorf("line %q is not JSON", line)
		}
	}
	for count := 1; count <= 7; count++ {
		var c, j bytes.Buffer
		for i := range count {
			s := Shard{i, count}
			lo, hi := s.Range(len(rows))
			if err := WriteCSV(&c, s, header, rows[lo:hi]); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSONLines(&j, objs[lo:hi]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(c.Bytes(), wholeCSV.Bytes()) || !bytes.Equal(j.Bytes(), wholeJSON.Bytes()) {
			t.Errorf("%d shards:\n%s\n%s\nwant\n%s\n%s", count, c.Bytes(), j.Bytes(), wholeCSV.Bytes(), wholeJSON.Bytes())
		}
	}
}

func TestWriteJSONLinesRaw(t *testing.T) {
	var b bytes.Buffer
	err := WriteJSONLines(&b, []json.RawMessage{json.RawMessage(`{"a": 1,  "b": [true]}`), json.RawMessage(`{}`)})
	if err != nil || b.String() != "{\"a\":1,\"b\":[true]}\n{}\n" {
		t.Errorf("%q, %v", b.String(), err)
	}
	if err := WriteJSONLines(&b, []json.RawMessage{json.RawMessage(`{"a": 1,5}`)}); err == nil {
		t.Error("no error for a row that is not JSON")
	}
}
