package vgpu

import (
	"fmt"
	"time"
)

// Clock is a driver's hold on a host's clock. While it is held, the host's
// own Advance is refused (ErrDriven) and only Clock.Advance moves the host
// on: a simulator that drives many hosts from one clock (migrate.Sim)
// takes theirs, so no other caller can advance one of them and leave it
// out of step with the rest.
type Clock struct {
	h      *Host
	driver string
}

// TakeClock gives driver, a name for errors, the host's clock. It fails
// with an error wrapping ErrDriven if another driver holds it.
func (h *Host) TakeClock(driver string) (*Clock, error) {
	if h.clock != nil {
		return nil, fmt.Errorf("%w: host %q is driven by %s", ErrDriven, h.cfg.Name, h.clock.driver)
	}
	h.clock = &Clock{h: h, driver: driver}
	return h.clock, nil
}

// Driver returns the name of the driver that holds the host's clock, and
// false if none does.
func (h *Host) Driver() (string, bool) {
	if h.clock == nil {
		return "", false
	}
	return h.clock.driver, true
}

// Advance moves the host on by d, as Host.Advance does for a host no
// driver holds. It fails with an error wrapping ErrDriven once the clock
// was released.
func (c *Clock) Advance(d time.Duration) error {
	if c.h.clock != c {
		return fmt.Errorf("%w: host %q: the clock of %s was released", ErrDriven, c.h.cfg.Name, c.driver)
	}
	return c.h.advance(d)
}

// Release gives the host's clock back: Host.Advance works again. Releasing
// twice does nothing.
func (c *Clock) Release() {
	if c.h.clock == c {
		c.h.clock = nil
	}
}
