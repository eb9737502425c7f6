package migrate

import (
	"fmt"
	"time"
)

// Event is something that happened to a migration at a moment of simulated
// time. Sim.Step returns them one at a time; each Migration keeps its own
// in its report.
type Event struct {
	// At is the Sim's time.
	At time.Duration `json:"at_ns"`
	// VM names the migrating VM.
	VM string `json:"vm"`
	// Phase is the phase the migration is in after the event.
	Phase Phase `json:"phase"`
	// Round is the pre-copy round the event concerns, -1 outside pre-copy.
	Round int `json:"round"`
	// Detail says what happened, for a person.
	Detail string `json:"detail"`
}

func (e Event) String() string {
	return fmt.Sprintf("%12v %s: %v: %s", e.At, e.VM, e.Phase, e.Detail)
}
