package migrate

import (
	"fmt"
	"strings"
	"time"
)

// Link is the network path a migration's stream crosses.
type Link struct {
	// Name is the short name used by LinkByName and in reports.
	Name string
	// BandwidthBitsPerSec is the nominal line rate.
	BandwidthBitsPerSec int64
	// Efficiency is the fraction of the line rate a migration stream
	// achieves as goodput, in (0, 1].
	Efficiency float64
	// Latency is the one-way delay of a message.
	Latency time.Duration
	// Source says where Efficiency comes from.
	Source string
}

// GoodputBytesPerSec is the rate at which stream bytes cross the link.
func (l Link) GoodputBytesPerSec() int64 {
	// One float multiply, correctly rounded: the same result on every
	// machine.
	return int64(float64(l.BandwidthBitsPerSec/8) * l.Efficiency)
}

func (l Link) String() string {
	return fmt.Sprintf("%s (%s, %.0f %% goodput, %v)", l.Name, formatBits(l.BandwidthBitsPerSec), 100*l.Efficiency, l.Latency)
}

func (l Link) validate() error {
	if l.BandwidthBitsPerSec < 8 || l.BandwidthBitsPerSec > maxLinkBitsPerSec {
		return fmt.Errorf("%w: link bandwidth %d bit/s outside [8, %d]", ErrConfig, l.BandwidthBitsPerSec, int64(maxLinkBitsPerSec))
	}
	if !(l.Efficiency > 0 && l.Efficiency <= 1) {
		return fmt.Errorf("%w: link efficiency %v outside (0, 1]", ErrConfig, l.Efficiency)
	}
	if l.Latency < 0 || l.Latency > time.Second {
		return fmt.Errorf("%w: link latency %v outside [0, 1s]", ErrConfig, l.Latency)
	}
	return nil
}

// maxLinkBitsPerSec bounds a link (10 Tb/s) so that rate arithmetic stays
// far inside 64 bits.
const maxLinkBitsPerSec = 10e12

// ethernetEfficiency is TCP goodput over Ethernet at a 1500-byte MTU:
// 1448 payload bytes (TCP with timestamps) of every 1538 bytes on the wire
// (preamble and gap 20, Ethernet header and FCS 18, IPv4 20, TCP 32).
const ethernetEfficiency = 1448.0 / 1538.0

const ethernetSource = "TCP/IPv4 goodput at 1500-byte MTU: 1448 of 1538 wire bytes"

// datacentreLatency is the one-way delay assumed for hosts in one data
// centre.
const datacentreLatency = 50 * time.Microsecond

// The presets are functions, so that a caller who changes the Link one
// returns changes only its own copy, never a default of the package.

// Ethernet presets: TCP goodput over 1, 10, 25, 40 and 100 Gb/s Ethernet
// between hosts of one data centre.

// GbE1 is 1 Gb/s Ethernet.
func GbE1() Link { return ethernet("1g", 1e9) }

// GbE10 is 10 Gb/s Ethernet, the network of VMware's published vGPU stun
// times and the default link of a Config.
func GbE10() Link { return ethernet("10g", 10e9) }

// GbE25 is 25 Gb/s Ethernet.
func GbE25() Link { return ethernet("25g", 25e9) }

// GbE40 is 40 Gb/s Ethernet.
func GbE40() Link { return ethernet("40g", 40e9) }

// GbE100 is 100 Gb/s Ethernet.
func GbE100() Link { return ethernet("100g", 100e9) }

func ethernet(name string, bps int64) Link {
	return Link{Name: name, BandwidthBitsPerSec: bps, Efficiency: ethernetEfficiency, Latency: datacentreLatency, Source: ethernetSource}
}

// bitfusionStudy is the source of the three remote-GPU networks below.
const bitfusionStudy = `"Machine Learning Leveraging NVIDIA GPUs with Bitfusion on VMware vSphere (Part 2 of 2)", VMware blog, 2019`

// The three networks of the Bitfusion remote-GPU study ("Machine Learning
// Leveraging NVIDIA GPUs with Bitfusion on VMware vSphere (Part 2 of 2)",
// VMware blog, 2019). The study reports application overhead against a
// local GPU, not link goodput; we take the worst overhead it reports for
// each network as the fraction of the line rate lost, a conservative
// reading.

// VMXNET3 is 10 Gb/s paravirtual Ethernet: "performance overheads ranging
// from 4% to 20%" -> 80 %.
func VMXNET3() Link {
	return Link{Name: "vmxnet3", BandwidthBitsPerSec: 10e9, Efficiency: 0.80, Latency: datacentreLatency,
		Source: bitfusionStudy + ": 10 Gb/s VMXNET3, overheads 4-20 %; worst case taken"}
}

// RoCE is 100 Gb/s RDMA over Converged Ethernet in DirectPath I/O: "5% or
// less performance degradation" -> 95 %.
func RoCE() Link {
	return Link{Name: "roce", BandwidthBitsPerSec: 100e9, Efficiency: 0.95, Latency: 5 * time.Microsecond,
		Source: bitfusionStudy + ": 100 Gb/s RoCE DirectPath I/O, 5 % or less overhead"}
}

// PVRDMA is VMware's paravirtual RDMA over 100 Gb/s RoCE. The study places
// it between the two ("the trade-off between performance and
// functionality") without a figure in its text; we assume 90 %.
func PVRDMA() Link {
	return Link{Name: "pvrdma", BandwidthBitsPerSec: 100e9, Efficiency: 0.90, Latency: 10 * time.Microsecond,
		Source: bitfusionStudy + ": PVRDMA between RoCE and VMXNET3; 90 % assumed"}
}

// Links returns every preset, slowest first: a new slice of copies.
func Links() []Link {
	return []Link{GbE1(), GbE10(), VMXNET3(), GbE25(), GbE40(), PVRDMA(), RoCE(), GbE100()}
}

// LinkByName returns the preset with the given name (case-insensitive;
// "10gbe" is read as "10g").
func LinkByName(name string) (Link, error) {
	n := strings.TrimSuffix(strings.ToLower(name), "be")
	var names []string
	for _, l := range Links() {
		if l.Name == n {
			return l, nil
		}
		names = append(names, l.Name)
	}
	return Link{}, fmt.Errorf("%w: unknown link %q (want one of %s)", ErrConfig, name, strings.Join(names, ", "))
}

func formatBits(bps int64) string {
	switch {
	case bps >= 1e9 && bps%1e9 == 0:
		return fmt.Sprintf("%d Gb/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f Mb/s", float64(bps)/1e6)
	}
	return fmt.Sprintf("%d b/s", bps)
}
