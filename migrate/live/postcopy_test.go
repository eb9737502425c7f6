package live

import (
	"errors"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
)

// TestSendRefusesPostCopy: post-copy is the simulated mode's alone for
// now; a live send asked for it is refused before it touches anything.
func TestSendRefusesPostCopy(t *testing.T) {
	for _, p := range []migrate.Policy{
		{Mode: migrate.PostCopy},
		{Mode: migrate.PreCopy, OnNonConvergence: migrate.SwitchToPostCopy},
	} {
		if _, err := (SendConfig{Policy: p}).withDefaults(); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("%v, %v: %v", p.Mode, p.OnNonConvergence, err)
		}
	}
}
