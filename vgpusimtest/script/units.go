package script

import (
	"math"
	"strconv"
	"strings"
)

// maxSize bounds sizes: far beyond any host, short of overflow.
const maxSize = 1 << 50

var sizeUnits = []struct {
	suffix string
	mult   float64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseSize reads a byte count with an optional binary unit; it must come
// to a whole number of bytes.
func parseSize(s string) (int64, error) {
	return parseUnits(s, sizeUnits, maxSize)
}

var bitUnits = []struct {
	suffix string
	mult   float64
}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}, {"bit", 1}, {"Gb/s", 1e9}, {"Mb/s", 1e6}, {"Kb/s", 1e3}, {"b/s", 1}}

// parseBits reads bits per second with an optional SI unit.
func parseBits(s string) (int64, error) { return parseUnits(s, bitUnits, 1e15) }

// parseUnits reads a number with one of units' suffixes, at most limit
// once multiplied and a whole number.
func parseUnits(s string, units []struct {
	suffix string
	mult   float64
}, limit float64) (int64, error) {
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	v := f * mult
	if !(v >= 0 && v <= limit) || v != math.Trunc(v) {
		return 0, errBadValue
	}
	return int64(v), nil
}
