package figure

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// WriteSVG end to end: the go command runs the plotting module, which may
// download gonum the first time, so this is not a -short test.
func TestWriteSVG(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: WriteSVG builds and runs the examples/plot module with the go command")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; WriteSVG needs it to run the examples/plot module")
	}
	path := filepath.Join(t.TempDir(), "fig.svg")
	if err := WriteSVG(valid(), path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, s := range []string{"<svg", "Stun time per profile", "vGPU profile", "stun time (s)", "legacy", "published", "1 s standard", "P40-2Q"} {
		if !strings.Contains(svg, s) {
			t.Errorf("the SVG lacks %q", s)
		}
	}
}

// From another directory of the repository, a relative path names a file
// relative to that directory, not to the plotting module's.
func TestWriteSVGFromElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: WriteSVG builds and runs the examples/plot module with the go command")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; WriteSVG needs it to run the examples/plot module")
	}
	dir := t.TempDir()
	t.Chdir("../../migrate")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, filepath.Join(dir, "fig.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSVG(valid(), rel); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fig.svg")); err != nil {
		t.Fatal(err)
	}
}

// Outside the repository the go command sees no main module: the error
// says what to run by hand.
func TestWriteSVGOutsideModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	t.Chdir(t.TempDir())
	t.Setenv("GOWORK", "off")
	err := WriteSVG(valid(), "fig.svg")
	if err == nil || !strings.Contains(err.Error(), "go run . -in FILE -o") {
		t.Fatalf("outside the module: %v", err)
	}
}

// An invalid figure is refused before the go command runs.
func TestWriteSVGValidates(t *testing.T) {
	if err := WriteSVG(Figure{}, filepath.Join(t.TempDir(), "x.svg")); err == nil || !strings.Contains(err.Error(), "no title") {
		t.Errorf("error %v", err)
	}
}
