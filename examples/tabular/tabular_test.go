package tabular

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/sweep"
)

// sample has a column of every kind, an empty number, a cell that needs
// quoting in CSV and escaping in JSON, a FileOnly column and a break.
func sample() *Table {
	t := &Table{Columns: []Column{
		{Name: "name"}, {Name: "size_gib", Kind: Number}, {Name: "ok", Kind: Bool},
		{Name: "note"}, {Name: "wire_gib", Kind: Number, FileOnly: true},
	}, Blank: "-"}
	t.Add("a", "1.5", "yes", `say "hi", <b>`, "0.250")
	t.Add("bb", "", "no", "", "1")
	t.Break()
	t.Add("c", "-2e3", "maybe", "x", "")
	return t
}

func TestWriteText(t *testing.T) {
	tests := []struct {
		name  string
		table func() *Table
		want  string
	}{
		{"blank, break, file-only column left out", sample, "" +
			"name  size_gib  ok     note\n" +
			"a     1.5       yes    say \"hi\", <b>\n" +
			"bb    -         no     -\n" +
			"\n" +
			"c     -2e3      maybe  x\n"},
		{"no blank", func() *Table { t := sample(); t.Blank = ""; return t }, "" +
			"name  size_gib  ok     note\n" +
			"a     1.5       yes    say \"hi\", <b>\n" +
			"bb              no\n" +
			"\n" +
			"c     -2e3      maybe  x\n"},
		{"no rows", func() *Table { return &Table{Columns: []Column{{Name: "a"}, {Name: "b"}}} }, "a  b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.table().WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	want := "name,size_gib,ok,note,wire_gib\n" +
		"a,1.5,yes,\"say \"\"hi\"\", <b>\",0.250\n" +
		"bb,,no,,1\n" +
		"c,-2e3,maybe,x,\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "name": "a",
    "size_gib": 1.5,
    "ok": true,
    "note": "say \"hi\", \u003cb\u003e",
    "wire_gib": 0.250
  },
  {
    "name": "bb",
    "size_gib": null,
    "ok": false,
    "note": "",
    "wire_gib": 1
  },
  {
    "name": "c",
    "size_gib": -2e3,
    "ok": false,
    "note": "x",
    "wire_gib": null
  }
]
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteJSONErrors(t *testing.T) {
	tests := []struct {
		name  string
		table func() *Table
		want  string
	}{
		{"NoNull and an empty number", func() *Table { t := sample(); t.NoNull = true; return t }, "empty number size_gib"},
		{"not a number", func() *Table { t := sample(); t.Rows[0][1] = "1,5"; return t }, "JSON table"},
		{"short row", func() *Table { t := sample(); t.Add("d"); return t }, "row 4 has 1 cells for 5 columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.table().WriteJSON(&bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// The JSON's keys come in column order, not sorted.
func TestJSONKeyOrder(t *testing.T) {
	tab := &Table{Columns: []Column{{Name: "z"}, {Name: "a", Kind: Number}, {Name: "m", Kind: Bool}}}
	tab.Add("1", "2", "yes")
	var b bytes.Buffer
	if err := tab.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&b)
	var keys []string
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok && dec.More() {
			keys = append(keys, s)
			dec.Token() // its value
		}
	}
	if !slices.Equal(keys, []string{"z", "a", "m"}) {
		t.Errorf("keys %v, want z a m", keys)
	}
}

// Read back, the CSV and the JSON hold the same table: every CSV field is
// the JSON value of its kind.
func TestCSVJSONRoundTrip(t *testing.T) {
	tab := sample()
	var c, j bytes.Buffer
	if err := tab.WriteCSV(&c); err != nil {
		t.Fatal(err)
	}
	if err := tab.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	dec := json.NewDecoder(&j)
	dec.UseNumber()
	if err := dec.Decode(&objs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs[0], tab.Names()) || len(objs) != len(recs)-1 {
		t.Fatalf("CSV header %v and %d rows, JSON %d rows", recs[0], len(recs)-1, len(objs))
	}
	for i, rec := range recs[1:] {
		for k, col := range tab.Columns {
			got, cell := objs[i][col.Name], rec[k]
			var ok bool
			switch {
			case col.Kind == Number && cell == "":
				ok = got == nil
			case col.Kind == Number:
				n, isNum := got.(json.Number)
				ok = isNum && string(n) == cell
			case col.Kind == Bool:
				ok = got == (cell == "yes")
			default:
				ok = got == cell
			}
			if !ok {
				t.Errorf("row %d %s: CSV %q, JSON %v", i+1, col.Name, cell, got)
			}
		}
	}
}

func TestWriteJSONObject(t *testing.T) {
	a := &Table{Columns: []Column{{Name: "x", Kind: Number}}}
	a.Add("1")
	b := &Table{Columns: []Column{{Name: "y"}}}
	var out bytes.Buffer
	if err := WriteJSONObject(&out, []string{"first", "second"}, []*Table{a, b}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"first\": [\n    {\n      \"x\": 1\n    }\n  ],\n  \"second\": []\n}\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if err := WriteJSONObject(&out, []string{"one"}, []*Table{a, b}); err == nil {
		t.Error("no error for two tables and one name")
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := WriteFile(path, sample().WriteCSV); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := sample().WriteCSV(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("file %q, want %q", got, want.String())
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir"), sample().WriteCSV); err == nil {
		t.Error("no error for a file in a missing directory")
	}
}

func TestWriteJSONLines(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteJSONLines(&b); err != nil {
		t.Fatal(err)
	}
	want := `{"name":"a","size_gib":1.5,"ok":true,"note":"say \"hi\", \u003cb\u003e","wire_gib":0.250}
{"name":"bb","size_gib":null,"ok":false,"note":"","wire_gib":1}
{"name":"c","size_gib":-2e3,"ok":false,"note":"x","wire_gib":null}
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	// Each line holds what the JSON array's object of its row does.
	var arr bytes.Buffer
	if err := sample().WriteJSON(&arr); err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(arr.Bytes(), &objs); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil || fmt.Sprint(o) != fmt.Sprint(objs[i]) {
			t.Errorf("line %d: %v, %v; want %v", i+1, o, err, objs[i])
		}
	}
	for _, tt := range []struct {
		name  string
		table func() *Table
		want  string
	}{
		{"NoNull and an empty number", func() *Table { t := sample(); t.NoNull = true; return t }, "empty number size_gib"},
		{"not a number", func() *Table { t := sample(); t.Rows[0][1] = "1,5"; return t }, "JSON lines"},
		{"short row", func() *Table { t := sample(); t.Add("d"); return t }, "row 4 has 1 cells for 5 columns"},
	} {
		if err := tt.table().WriteJSONLines(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// The shards' CSV, the header in shard 0's alone, and their JSON Lines
// concatenate into the whole table's.
func TestWriteShardCSV(t *testing.T) {
	whole := sample()
	var wantCSV, wantJSON bytes.Buffer
	if err := whole.WriteCSV(&wantCSV); err != nil {
		t.Fatal(err)
	}
	if err := whole.WriteJSONLines(&wantJSON); err != nil {
		t.Fatal(err)
	}
	var gotCSV, gotJSON bytes.Buffer
	for i := range 4 {
		s := sweep.Shard{Index: i, Count: 4}
		lo, hi := s.Range(len(whole.Rows))
		part := &Table{Columns: whole.Columns, Rows: whole.Rows[lo:hi]}
		if err := part.WriteShardCSV(&gotCSV, s); err != nil {
			t.Fatal(err)
		}
		if err := part.WriteJSONLines(&gotJSON); err != nil {
			t.Fatal(err)
		}
	}
	if gotCSV.String() != wantCSV.String() || gotJSON.String() != wantJSON.String() {
		t.Errorf("shards wrote\n%s%s\nwant\n%s%s", gotCSV.String(), gotJSON.String(), wantCSV.String(), wantJSON.String())
	}
}

// TestParseFlags: -csv alone, with =FILE, with FILE after it, and absent.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		given, stdout bool
		path          string
		rest          []string
	}{
		{nil, false, false, "", nil},
		{[]string{"-csv"}, true, true, "", nil},
		{[]string{"-csv", "-"}, true, true, "-", nil},
		{[]string{"-csv=out.csv"}, true, false, "out.csv", nil},
		{[]string{"-csv", "out.csv", "-n", "3"}, true, false, "out.csv", nil},
		{[]string{"-n", "3", "-csv"}, true, true, "", nil},
		{[]string{"-csv", "-n", "3", "extra"}, true, true, "", []string{"extra"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var c CSVFlag
		fs.Var(&c, "csv", "")
		fs.Int("n", 0, "")
		if err := ParseFlags(fs, &c, tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if c.Given() != tc.given || c.ToStdout() != tc.stdout || c.Path() != tc.path || !slices.Equal(fs.Args(), tc.rest) {
			t.Errorf("%q: given %t, stdout %t, path %q, rest %q", tc.args, c.Given(), c.ToStdout(), c.Path(), fs.Args())
		}
	}
}
