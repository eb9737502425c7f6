package figure

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Figure is a figure as data: one or more panels stacked vertically.
type Figure struct {
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one plot of a figure: two axes, the series drawn against them
// and horizontal reference lines across them.
type Panel struct {
	Title  string   `json:"title,omitempty"`
	X      Axis     `json:"x"`
	Y      Axis     `json:"y"`
	Series []Series `json:"series"`
	HLines []HLine  `json:"hlines,omitempty"` // e.g. the 1 s stun standard
}

// Axis is an axis of a panel.
type Axis struct {
	Label string `json:"label"`
	Unit  string `json:"unit,omitempty"` // drawn as "Label (Unit)"
	Log   bool   `json:"log,omitempty"`
	// Categories makes a category axis: X values are indices into it.
	Categories []string `json:"categories,omitempty"`
}

// Title is the axis label as drawn: "Label (Unit)", or Label alone.
func (a Axis) Title() string {
	if a.Unit == "" {
		return a.Label
	}
	return a.Label + " (" + a.Unit + ")"
}

// Series kinds.
const (
	Line   = "line"
	Points = "points"
	Bars   = "bars"
)

// Series is one legend entry's points.
type Series struct {
	Name      string  `json:"name"`                // the legend entry
	Kind      string  `json:"kind"`                // Line, Points or Bars
	Reference bool    `json:"reference,omitempty"` // published points: drawn as distinct markers
	Points    []Point `json:"points"`
}

// Point is one data point; Label, if any, is written beside it.
type Point struct {
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	Label string  `json:"label,omitempty"`
}

// HLine is a horizontal line across a panel, with its label.
type HLine struct {
	Y     float64 `json:"y"`
	Label string  `json:"label"`
}

// Limits on a figure, so that a hostile or mistaken one fails cleanly
// instead of drawing for minutes.
const (
	MaxPanels = 8
	MaxSeries = 32    // per panel
	MaxPoints = 10000 // per series
)

// Validate reports what makes f undrawable: a missing title or axis label,
// a series without a name or with an unknown kind, a value that is not
// finite (or not positive on a logarithmic axis), a category index out of
// range, or more panels, series or points than the limits allow.
func (f Figure) Validate() error {
	if f.Title == "" {
		return errors.New("figure: no title")
	}
	if len(f.Panels) == 0 || len(f.Panels) > MaxPanels {
		return fmt.Errorf("figure: %d panels, want 1 to %d", len(f.Panels), MaxPanels)
	}
	for i, p := range f.Panels {
		if err := p.validate(); err != nil {
			return fmt.Errorf("figure: panel %d: %w", i+1, err)
		}
	}
	return nil
}

func (p Panel) validate() error {
	if p.X.Label == "" || p.Y.Label == "" {
		return errors.New("an axis has no label")
	}
	if len(p.Y.Categories) > 0 {
		return errors.New("the Y axis has categories; only X may")
	}
	if p.X.Log && len(p.X.Categories) > 0 {
		return errors.New("the X axis is both logarithmic and a category axis")
	}
	if len(p.Series) == 0 || len(p.Series) > MaxSeries {
		return fmt.Errorf("%d series, want 1 to %d", len(p.Series), MaxSeries)
	}
	for _, s := range p.Series {
		if err := s.validate(p.X, p.Y); err != nil {
			return fmt.Errorf("series %q: %w", s.Name, err)
		}
	}
	for _, h := range p.HLines {
		if h.Label == "" {
			return errors.New("a horizontal line has no label")
		}
		if err := checkValue(h.Y, p.Y); err != nil {
			return fmt.Errorf("horizontal line %q: %w", h.Label, err)
		}
	}
	return nil
}

func (s Series) validate(x, y Axis) error {
	if s.Name == "" {
		return errors.New("no name")
	}
	switch s.Kind {
	case Line, Points:
	case Bars:
		if y.Log {
			// A bar rises from zero, which a logarithmic axis lacks.
			return errors.New("bars on a logarithmic Y axis")
		}
	default:
		return fmt.Errorf("kind %q, want %q, %q or %q", s.Kind, Line, Points, Bars)
	}
	if len(s.Points) == 0 || len(s.Points) > MaxPoints {
		return fmt.Errorf("%d points, want 1 to %d", len(s.Points), MaxPoints)
	}
	for i, pt := range s.Points {
		if err := checkValue(pt.X, x); err != nil {
			return fmt.Errorf("point %d: x %w", i+1, err)
		}
		if err := checkValue(pt.Y, y); err != nil {
			return fmt.Errorf("point %d: y %w", i+1, err)
		}
		if n := len(x.Categories); n > 0 && (pt.X != math.Trunc(pt.X) || pt.X < 0 || int(pt.X) >= n) {
			return fmt.Errorf("point %d: x %v is not a category index (0 to %d)", i+1, pt.X, n-1)
		}
	}
	return nil
}

// checkValue checks v can be drawn on axis a.
func checkValue(v float64, a Axis) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not finite", v)
	case a.Log && v <= 0:
		return fmt.Errorf("%v is not positive, on a logarithmic axis", v)
	}
	return nil
}

// WriteJSON writes f as indented JSON, after validating it.
func (f Figure) WriteJSON(w io.Writer) error {
	if err := f.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("figure: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// maxJSONBytes bounds what ReadJSON reads: MaxPanels full panels of
// points would be far larger, but no figure an example draws comes near.
const maxJSONBytes = 64 << 20

// ReadJSON reads a figure written by WriteJSON and validates it. Unknown
// fields are an error, so that a misspelt one is not silently dropped.
func ReadJSON(r io.Reader) (Figure, error) {
	dec := json.NewDecoder(io.LimitReader(r, maxJSONBytes))
	dec.DisallowUnknownFields()
	var f Figure
	if err := dec.Decode(&f); err != nil {
		return Figure{}, fmt.Errorf("figure: reading JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Figure{}, errors.New("figure: reading JSON: data after the figure")
	}
	if err := f.Validate(); err != nil {
		return Figure{}, err
	}
	return f, nil
}
