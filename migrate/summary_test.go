package migrate_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestSummary: an evacuation's six migrations and one failed migration sum
// up to a row each, the totals of each host and link, and the stun's
// nearest-rank percentiles over the six that succeeded; the CSV has a row
// per migration under the JSON form's names.
func TestSummary(t *testing.T) {
	ev, _ := evacuate(t, migrate.EvacuateConfig{Placement: vgpu.BreadthFirst})
	var reps []*migrate.Report
	var stuns []time.Duration
	for _, m := range ev.Migrations() {
		reps = append(reps, m.Report())
		stuns = append(stuns, m.Report().Stun)
	}
	reps = append(reps, &migrate.Report{VM: "x", Source: "src", Destination: "dst-b", Link: "other",
		Outcome: migrate.PhaseFailed, FailedIn: migrate.PhasePreCopy, Error: "link down", WireBytes: 7})
	s := migrate.Summarize(reps)
	slices.Sort(stuns)
	if len(s.Rows) != 7 || s.Stun.Count != 6 || s.Stun.P50 != stuns[2] || s.Stun.P90 != stuns[5] || s.Stun.Max != stuns[5] {
		t.Fatalf("%d rows, stun %+v; stuns %v", len(s.Rows), s.Stun, stuns)
	}
	hosts := map[string]migrate.GroupTotal{}
	for _, h := range s.Hosts {
		hosts[h.Name] = h
	}
	if h := hosts["src"]; h.Out != 7 || h.In != 0 || h.Failed != 1 || h.Stun.Count != 6 {
		t.Errorf("src: %+v", h)
	}
	if h := hosts["dst-b"]; h.In != 3 || h.Failed != 1 || h.Stun.Count != 2 {
		t.Errorf("dst-b: %+v", h)
	}
	if len(s.Links) != 2 || s.Links[0].Name != "10g" || s.Links[0].Migrations != 6 || s.Links[1].WireBytes != 7 {
		t.Errorf("links %+v", s.Links)
	}

	var buf bytes.Buffer
	if err := s.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(s.Rows[6])
	if err != nil {
		t.Fatal(err)
	}
	// The row's JSON keys, in order: the object's tokens, key then value.
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
	}
	if len(recs) != 8 || !slices.Equal(recs[0], keys) || recs[7][0] != "x" || recs[7][5] != "failed" || recs[7][13] != "link down" {
		t.Fatalf("CSV %q\nJSON keys %q", recs, keys)
	}
	if empty := migrate.Summarize(nil); empty.Stun != (migrate.StunPercentiles{}) || len(empty.Rows) != 0 {
		t.Errorf("an empty summary: %+v", empty)
	}
}
