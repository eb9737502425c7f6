package migrate_test

import (
	"testing"

	"github.com/vgpusim/vgpusim/vgpusimtest/script"
)

// TestScripts runs the scenario scripts under testdata/scripts: the
// published experiments the library reproduces and the simulated fault
// table, each command's output written after it. Rewrite them with
// go test -run TestScripts ./migrate -vgpusimtest.rewrite.
func TestScripts(t *testing.T) {
	script.RunDir(t, "testdata/scripts")
}
