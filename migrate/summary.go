package migrate

import (
	"encoding/csv"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// Summary sums up many migrations: a row for each, the totals of each link
// (a migration counts towards every link it crossed) and each host, and
// the stun's percentiles. It writes as CSV (WriteCSV,
// one row per migration) and as JSON (encoding/json).
type Summary struct {
	Rows  []SummaryRow `json:"migrations"`
	Links []GroupTotal `json:"links"`
	Hosts []GroupTotal `json:"hosts"`
	// Stun is over the migrations that succeeded.
	Stun StunPercentiles `json:"stun"`
}

// SummaryRow is one migration of a Summary.
type SummaryRow struct {
	VM          string `json:"vm"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Link names the links the stream crossed, in order, joined by
	// " > ": Report.Link, then Report.Via.
	Link      string        `json:"link"`
	Mode      Mode          `json:"mode"`
	Outcome   Phase         `json:"outcome"`
	Start     time.Duration `json:"start_ns"`
	End       time.Duration `json:"end_ns"`
	Stun      time.Duration `json:"stun_ns"`
	Rounds    int           `json:"rounds"`
	WireBytes int64         `json:"wire_bytes"`
	RawBytes  int64         `json:"raw_bytes"`
	// MeetsStandard is Report.MeetsStandard: done, with a stun under 1 s.
	MeetsStandard bool   `json:"meets_standard"`
	Error         string `json:"error,omitempty"`
}

// GroupTotal is what the migrations over one link, or to or from one host,
// add up to.
type GroupTotal struct {
	Name string `json:"name"`
	// Migrations counts them all; Out and In, for a host, those it was the
	// source and the destination of; Failed those that failed.
	Migrations int             `json:"migrations"`
	Out        int             `json:"out,omitempty"`
	In         int             `json:"in,omitempty"`
	Failed     int             `json:"failed"`
	WireBytes  int64           `json:"wire_bytes"`
	Stun       StunPercentiles `json:"stun"`
}

// StunPercentiles are the nearest-rank percentiles of the stun of the
// migrations that succeeded; all zero if none did.
type StunPercentiles struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize sums up reports, in their order; links and hosts come in name
// order.
func Summarize(reports []*Report) Summary {
	var s Summary
	links, hosts := map[string]*groupAcc{}, map[string]*groupAcc{}
	var all []time.Duration
	for _, r := range reports {
		path := r.route()
		row := SummaryRow{VM: r.VM, Source: r.Source, Destination: r.Destination, Link: joinRoute(path), Mode: r.Mode,
			Outcome: r.Outcome, Start: r.Start, End: r.End, Stun: r.Stun, Rounds: len(r.Rounds),
			WireBytes: r.WireBytes, RawBytes: r.RawBytes, MeetsStandard: r.MeetsStandard(), Error: r.Error}
		s.Rows = append(s.Rows, row)
		for _, l := range path {
			acc(links, l).add(row)
		}
		acc(hosts, r.Source).add(row)
		acc(hosts, r.Source).t.Out++
		acc(hosts, r.Destination).add(row)
		acc(hosts, r.Destination).t.In++
		if r.Outcome == PhaseDone {
			all = append(all, r.Stun)
		}
	}
	s.Links, s.Hosts, s.Stun = totals(links), totals(hosts), stunPercentiles(all)
	return s
}

// groupAcc gathers a GroupTotal and its stuns.
type groupAcc struct {
	t     GroupTotal
	stuns []time.Duration
}

func acc(m map[string]*groupAcc, name string) *groupAcc {
	a := m[name]
	if a == nil {
		a = &groupAcc{t: GroupTotal{Name: name}}
		m[name] = a
	}
	return a
}

func (a *groupAcc) add(r SummaryRow) {
	a.t.Migrations++
	a.t.WireBytes += r.WireBytes
	if r.Outcome == PhaseDone {
		a.stuns = append(a.stuns, r.Stun)
	} else {
		a.t.Failed++
	}
}

func totals(m map[string]*groupAcc) []GroupTotal {
	out := make([]GroupTotal, 0, len(m))
	for _, a := range m {
		a.t.Stun = stunPercentiles(a.stuns)
		out = append(out, a.t)
	}
	slices.SortFunc(out, func(a, b GroupTotal) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func stunPercentiles(stuns []time.Duration) StunPercentiles {
	if len(stuns) == 0 {
		return StunPercentiles{}
	}
	s := slices.Clone(stuns)
	slices.Sort(s)
	return StunPercentiles{Count: len(s), P50: vgpu.Percentile(s, 50), P90: vgpu.Percentile(s, 90),
		P99: vgpu.Percentile(s, 99), Max: s[len(s)-1]}
}

// summaryHeader is the CSV header: the JSON names of SummaryRow's fields.
var summaryHeader = []string{"vm", "source", "destination", "link", "mode", "outcome", "start_ns", "end_ns",
	"stun_ns", "rounds", "wire_bytes", "raw_bytes", "meets_standard", "error"}

// WriteCSV writes a header and one row per migration, times in
// nanoseconds, under the names the JSON form uses.
func (s Summary) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(summaryHeader); err != nil {
		return err
	}
	d := func(t time.Duration) string { return strconv.FormatInt(int64(t), 10) }
	for _, r := range s.Rows {
		rec := []string{r.VM, r.Source, r.Destination, r.Link, r.Mode.String(), r.Outcome.String(), d(r.Start), d(r.End),
			d(r.Stun), strconv.Itoa(r.Rounds), strconv.FormatInt(r.WireBytes, 10), strconv.FormatInt(r.RawBytes, 10),
			strconv.FormatBool(r.MeetsStandard), r.Error}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
