package figure

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PlotDir is the plotting module's directory, relative to the library's
// module root.
const PlotDir = "examples/plot"

// plotModule is the plotting module's path, as its go.mod declares it.
const plotModule = "github.com/vgpusim/vgpusim/examples/plot"

// WriteSVG renders f to path through the examples/plot module, by running
// `go run` there with the figure on standard input. The module is found
// from the go command's view of the main module (`go env GOMOD`, then
// examples/plot beside it), so it works from any directory inside the
// repository. The error says what to run by hand if the go command or the
// module is missing.
func WriteSVG(f Figure, path string) error {
	if err := f.Validate(); err != nil {
		return err
	}
	var in bytes.Buffer
	if err := f.WriteJSON(&in); err != nil {
		return err
	}
	out, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("figure: %w", err)
	}
	byHand := fmt.Sprintf("to draw it by hand, write the figure as JSON (-figure FILE) and run "+
		"`go run . -in FILE -o %s` in the repository's %s directory", out, PlotDir)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("figure: drawing %s needs the go command, which is not on PATH; %s", path, byHand)
	}
	dir, err := findPlotDir(goCmd)
	if err != nil {
		return fmt.Errorf("figure: drawing %s: %w; %s", path, err, byHand)
	}
	cmd := exec.Command(goCmd, "run", ".", "-o", out)
	cmd.Dir = dir
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("figure: drawing %s: go run in %s: %s", path, dir, msg)
	}
	return nil
}

// findPlotDir returns the plotting module's directory: the main module's
// examples/plot, or the main module itself when the go command runs inside
// the plotting module.
func findPlotDir(goCmd string) (string, error) {
	out, err := exec.Command(goCmd, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the vgpusim module (go env GOMOD names no go.mod)")
	}
	root := filepath.Dir(gomod)
	for _, dir := range []string{filepath.Join(root, filepath.FromSlash(PlotDir)), root} {
		if isPlotModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no plotting module at %s", filepath.Join(root, filepath.FromSlash(PlotDir)))
}

// isPlotModule reports whether the go.mod at path declares the plotting
// module.
func isPlotModule(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == plotModule
		}
	}
	return false
}

// WriteFiles writes f as JSON to jsonPath and draws it as SVG to svgPath,
// each only if its path is not empty: what an example's -figure and -svg
// flags ask for.
func (f Figure) WriteFiles(jsonPath, svgPath string) error {
	if jsonPath != "" {
		out, err := os.Create(jsonPath)
		if err != nil {
			return fmt.Errorf("figure: %w", err)
		}
		if err := f.WriteJSON(out); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("figure: %w", err)
		}
	}
	if svgPath != "" {
		return WriteSVG(f, svgPath)
	}
	return nil
}
