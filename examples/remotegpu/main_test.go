package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vgpusim/vgpusim/examples/internal/tablecheck"
	"github.com/vgpusim/vgpusim/vgpu"
)

// quickParams is the default experiment cut down for the tests: the
// smallest and a large batch, two measured iterations, one and two
// clients.
func quickParams() params {
	p := defaultParams()
	p.batches = []int{16, 64}
	p.iterations = 2
	p.clients = []int{1, 2}
	return p
}

// quick is quickParams' result, simulated once for every test that reads
// it.
var quick = sync.OnceValues(func() (result, error) { return simulate(quickParams()) })

func quickResult(t *testing.T) result {
	t.Helper()
	res, err := quick()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The shapes of the source's Figures 2 to 4 and its discussion: over
// 10 GbE VMXNET3 the overhead is 4 to 20 % (here within a few points of
// that), over 100 Gb RoCE 5 % or less, PVRDMA's between them; it falls as
// the batch grows, for each model and link; and ResNet-50 pays less of it
// than Inception V3 over 10 GbE.
func TestOverheadShapes(t *testing.T) {
	p := quickParams()
	res := quickResult(t)
	if want := len(p.models) * len(p.batches) * len(p.links); len(res.rows) != want {
		t.Fatalf("%d rows, want %d", len(res.rows), want)
	}
	type key struct {
		model string
		batch int
		link  string
	}
	o := map[key]float64{}
	for _, r := range res.rows {
		if r.local <= 0 || r.remote <= r.local {
			t.Errorf("%s batch %d over %s: remote %v, local %v; want remote slower", r.model, r.batch, r.link.Name, r.remote, r.local)
		}
		o[key{r.model, r.batch, r.link.Name}] = r.overheadPct()
	}
	for _, m := range p.models {
		for _, b := range p.batches {
			vx, roce, pv := o[key{m.Name, b, nameVMXNET3}], o[key{m.Name, b, nameRoCE}], o[key{m.Name, b, namePVRDMA}]
			if vx < 3 || vx > 23 {
				t.Errorf("%s batch %d: 10 GbE overhead %.1f %%, not within about 4 to 20 %%", m.Name, b, vx)
			}
			if roce <= 0 || roce > 5 {
				t.Errorf("%s batch %d: RoCE overhead %.1f %%, not in (0, 5 %%]", m.Name, b, roce)
			}
			if !(roce < pv && pv < vx) {
				t.Errorf("%s batch %d: PVRDMA's %.1f %% not between RoCE's %.1f %% and 10 GbE's %.1f %%", m.Name, b, pv, roce, vx)
			}
		}
		for _, l := range p.links {
			for i := 1; i < len(p.batches); i++ {
				small, large := o[key{m.Name, p.batches[i-1], l.Name}], o[key{m.Name, p.batches[i], l.Name}]
				if large >= small {
					t.Errorf("%s over %s: %.1f %% at batch %d, not below batch %d's %.1f %%", m.Name, l.Name, large, p.batches[i], p.batches[i-1], small)
				}
			}
		}
	}
	for _, b := range p.batches {
		r, i := o[key{vgpu.ResNet50().Name, b, nameVMXNET3}], o[key{vgpu.InceptionV3().Name, b, nameVMXNET3}]
		if r >= i {
			t.Errorf("batch %d over 10 GbE: ResNet-50's %.1f %% not below Inception V3's %.1f %%", b, r, i)
		}
	}
	for _, r := range res.rows {
		if n := r.normalized(); n <= 0 || n >= 1 || abs(100*(1/n-1)-r.overheadPct()) > 1e-9 {
			t.Errorf("%s batch %d over %s: normalized %v against overhead %.3f %%", r.model, r.batch, r.link.Name, n, r.overheadPct())
		}
	}
}

func abs(x float64) float64 { return max(x, -x) }

// Clients sharing one server GPU share its scheduler: one client alone
// runs as fast as over the same link with a whole-GPU session, leaving the
// GPU idle while it waits on the network; two keep it busier, each taking
// about twice as long an iteration, and train more images a second
// together than one does.
func TestSharing(t *testing.T) {
	p := quickParams()
	res := quickResult(t)
	runs := summarizeShare(p, res.share)
	if len(runs) != 2 || runs[0].clients != 1 || runs[1].clients != 2 || len(res.share) != 3 {
		t.Fatalf("sharing runs %+v, rows %+v", runs, res.share)
	}
	alone := res.share[0]
	for _, r := range res.rows {
		if r.model == p.shareModel.Name && r.batch == p.shareBatch && r.link.Name == p.shareLink.Name {
			if alone.iteration != r.remote || alone.local != r.local {
				t.Errorf("one client on a %s: %v (local %v); on a %s over the same link: %v (local %v)",
					p.shareProfile, alone.iteration, alone.local, localProfile, r.remote, r.local)
			}
		}
	}
	// Alone, the GPU is busy for the iteration's work, the local
	// iteration, of each remote one.
	if want := 100 * float64(alone.local) / float64(alone.iteration); abs(runs[0].gpuUtilPct-want) > 0.5 {
		t.Errorf("one client: GPU busy %.2f %%, want about %.2f %%", runs[0].gpuUtilPct, want)
	}
	if runs[0].gpuUtilPct > 95 || runs[1].gpuUtilPct < runs[0].gpuUtilPct+10 {
		t.Errorf("GPU utilization %.1f %% with one client, %.1f %% with two: want the second well above", runs[0].gpuUtilPct, runs[1].gpuUtilPct)
	}
	for _, s := range res.share[1:] {
		if x := float64(s.iteration) / float64(s.local); x < 1.9 || x > 2.5 {
			t.Errorf("two clients, vm%d: an iteration %.2f times a local one, want about 2", s.client, x)
		}
	}
	if runs[1].imagesPerS <= runs[0].imagesPerS {
		t.Errorf("two clients train %.1f images/s, one %.1f", runs[1].imagesPerS, runs[0].imagesPerS)
	}
}

// The note is computed from the rows: rows whose overhead rises with the
// batch, or whose ResNet-50 pays more than Inception V3, say so.
func TestSummaryFromRows(t *testing.T) {
	res := quickResult(t)
	var out bytes.Buffer
	if err := writeSummary(&out, summarize(res.rows)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"for every model and link: yes.", "at 2 batches compared: yes.", "for 4 of 4 models and batches"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("note lacks %q:\n%s", want, out.String())
		}
	}
	// Double two remote times: Inception V3's RoCE overhead now rises
	// with the batch and leaves PVRDMA's below it at batch 64, and
	// ResNet-50's 10 GbE overhead exceeds Inception V3's at batch 16.
	rows := append([]row(nil), res.rows...)
	for i := range rows {
		if rows[i].link.Name == nameVMXNET3 && rows[i].model == vgpu.ResNet50().Name && rows[i].batch == 16 {
			rows[i].remote = 2 * rows[i].local
		}
		if rows[i].link.Name == nameRoCE && rows[i].model == vgpu.InceptionV3().Name && rows[i].batch == 64 {
			rows[i].remote = 2 * rows[i].local
		}
	}
	s := summarize(rows)
	out.Reset()
	if err := writeSummary(&out, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"to 100.0 %, 2 of 4 runs above 20 % (the source: 4 to 20 %)",
		"for 3 of 4 models and batches",
		"for every model and link: no: Inception V3 over 100 Gb RoCE.", "1 of 4 runs above 5 %",
		"at 2 batches compared: no: batch 16.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("note of changed rows lacks %q:\n%s", want, out.String())
		}
	}
}

// -csv writes the overhead table: the printed rows under column names
// that carry their units.
func TestCSVIsTheTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	var out, errs bytes.Buffer
	args := []string{"-csv", path, "-batches", "16,64", "-iterations", "2", "-clients", "1,2"}
	if code := run(args, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := tablecheck.Rows(t, b, columns)
	res := quickResult(t)
	// The printed rows, their cells one space apart.
	var printed strings.Builder
	for line := range strings.Lines(out.String()) {
		printed.WriteString(strings.Join(strings.Fields(line), " ") + "\n")
	}
	if len(recs) != len(res.rows) {
		t.Fatalf("CSV has %d rows, the table %d", len(recs), len(res.rows))
	}
	for i, r := range res.rows {
		f := r.fields()
		for j, c := range columns {
			if recs[i][c] != f[j] {
				t.Errorf("CSV row %d %s = %q, table %q", i+1, c, recs[i][c], f[j])
			}
		}
		if !strings.Contains(printed.String(), "\n"+strings.Join(f, " ")+"\n") {
			t.Errorf("printed table lacks row %v", f)
		}
		tablecheck.Number(t, recs[i]["overhead_pct"])
	}
}

// Every spelling of -csv writes the same CSV: alone, to standard output
// instead of the aligned table; with a file, to the file beside the table.
func TestCSVFlagForms(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	csvOf := func(args ...string) (stdout, file string) {
		t.Helper()
		var out, errs bytes.Buffer
		if code := run(append(args, "-batches", "16", "-iterations", "1", "-clients", ""), &out, &errs); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs.String())
		}
		if strings.Contains(strings.Join(args, " "), path) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			return out.String(), string(b)
		}
		return out.String(), ""
	}
	alone, _ := csvOf("-csv")
	if !strings.HasPrefix(alone, strings.Join(columns, ",")+"\n") {
		t.Fatalf("-csv alone printed %.80q..., want CSV", alone)
	}
	dash, _ := csvOf("-csv", "-")
	table, spaced := csvOf("-csv", path)
	_, joined := csvOf("-csv=" + path)
	if dash != alone || spaced != alone || joined != alone {
		t.Fatal("-csv, -csv -, -csv FILE and -csv=FILE wrote different CSV")
	}
	if strings.Contains(table, strings.Join(columns, ",")) || !strings.Contains(table, "overhead_pct") {
		t.Fatalf("with -csv FILE the printed table is not the aligned one: %.80q...", table)
	}
}

func TestSameOutput(t *testing.T) {
	var a, b, errs bytes.Buffer
	args := []string{"-batches", "32", "-iterations", "1", "-clients", "2"}
	run(args, &a, &errs)
	run(args, &b, &errs)
	if a.String() != b.String() || a.Len() == 0 {
		t.Fatal("two runs printed different output")
	}
}

func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-h"}, &out, &errs); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, f := range []string{"-csv", "-json", "-svg", "-figure", "-iterations", "-batches", "-clients"} {
		if !strings.Contains(errs.String(), f) {
			t.Errorf("usage lacks %s: %q", f, errs.String())
		}
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-nosuchflag"}, 2},
		{[]string{"-batches", "16,x"}, 2},
		{[]string{"extra"}, 2},
		{[]string{"-iterations", "0"}, 1},
		{[]string{"-iterations", "101"}, 1},
		{[]string{"-batches", ""}, 1},
		{[]string{"-batches", "0"}, 1},
		{[]string{"-batches", "257"}, 1},
		{[]string{"-clients", "5"}, 1},
	} {
		out.Reset()
		errs.Reset()
		if code := run(c.args, &out, &errs); code != c.code {
			t.Errorf("%q: exit %d, want %d (%s)", c.args, code, c.code, errs.String())
		}
	}
}
