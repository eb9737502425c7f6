// Package figure describes an example's figure as data, so that the
// examples, which live in the library's module, can draw plots without the
// library depending on a plotting package.
//
// # Shape
//
// A [Figure] is a title and one or more [Panel]s stacked vertically. A
// panel has an X and a Y [Axis], each labelled with its unit, linear or
// logarithmic, or a category axis whose X values are indices into its
// Categories; [Series] of points drawn as a line, as points or as bars
// grouped per category; and horizontal reference lines ([HLine]), such as
// vMotion's one-second stun standard. A series marked Reference holds
// published figures, drawn as distinct hollow markers.
//
// # Rendering
//
// [WriteSVG] renders a figure through the plotting module in the
// examples/plot directory, which has its own go.mod and depends on
// gonum.org/v1/plot: it runs that module with the go command and hands it
// the figure as JSON on standard input. The same JSON ([Figure.WriteJSON])
// can be drawn by hand:
//
//	cd examples/plot && go run . -in figure.json -o figure.svg
//
// An example that draws a figure takes -svg FILE, which calls WriteSVG, and
// may take -figure FILE, which writes the JSON.
package figure
