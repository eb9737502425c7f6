package main

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// linearTicks labels a linear axis every 1, 2 or 5 times a power of ten,
// some three to seven labels, with unlabelled ticks between, each label
// with the fewest decimals that tell the labels apart ("0, 25, 50, 75",
// "0.0, 0.5, 1.0"): gonum's DefaultTicks writes "75.00".
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: shortest([]float64{lo})[0]}}
	}
	step, minor := niceStep((hi - lo) / 6)
	var major []float64
	var ticks []plot.Tick
	const eps = 1e-9
	first := math.Ceil(lo/minor-eps) * minor
	for i := 0; ; i++ {
		v := first + float64(i)*minor
		if v > hi+eps*(hi-lo) {
			break
		}
		if r := v / step; math.Abs(r-math.Round(r)) < 1e-6 {
			v = math.Round(r) * step // 0.30000000000000004 is 0.3
			major = append(major, v)
			ticks = append(ticks, plot.Tick{Value: v, Label: "major"})
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v})
	}
	labels := shortest(major)
	for i, j := 0, 0; i < len(ticks); i++ {
		if ticks[i].Label != "" {
			ticks[i].Label = labels[j]
			j++
		}
	}
	return ticks
}

// niceStep is the 1, 2 or 5 times a power of ten nearest above raw, and
// the step of the unlabelled ticks between.
func niceStep(raw float64) (step, minor float64) {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch m := raw / p; {
	case m <= 1:
		return p, p / 5
	case m <= 2:
		return 2 * p, p / 2
	case m <= 5:
		return 5 * p, p
	default:
		return 10 * p, 2 * p
	}
}

// shortest formats vs with the fewest decimals, the same for all, that
// write each value exactly (to a part in a million of the largest).
func shortest(vs []float64) []string {
	var scale float64
	for _, v := range vs {
		scale = max(scale, math.Abs(v))
	}
	out := make([]string, len(vs))
	for prec := 0; prec <= 10; prec++ {
		exact := true
		for i, v := range vs {
			out[i] = strconv.FormatFloat(v, 'f', prec, 64)
			if got, _ := strconv.ParseFloat(out[i], 64); math.Abs(got-v) > 1e-6*scale {
				exact = false
			}
		}
		if exact {
			break
		}
	}
	for i, s := range out {
		if got, _ := strconv.ParseFloat(s, 64); got == 0 {
			out[i] = strings.TrimPrefix(s, "-") // no "-0"
		}
	}
	return out
}

// decadeTicks labels every power of ten on a logarithmic axis, with
// unlabelled ticks between. gonum's LogTicks starts from the wrong decade
// when the axis starts below 1 (it truncates the logarithm toward zero).
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		for i := 1; i < 10; i++ {
			t := plot.Tick{Value: v * float64(i)}
			if i == 1 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			if t.Value >= lo*(1-1e-9) && t.Value <= hi*(1+1e-9) {
				ticks = append(ticks, t)
			}
		}
	}
	return ticks
}
