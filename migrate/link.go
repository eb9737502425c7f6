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
// (preamble and gap 20, Ethernet header and FCS 18, IPv4 20, TCP 32),
// 94.1 %. The sizes are the standards': preamble, start delimiter and
// minimum inter-frame gap, MAC header and FCS from IEEE 802.3; the IPv4
// header from RFC 791; the TCP header from RFC 9293 with the 12 bytes the
// timestamps option of RFC 7323 takes in every segment. It is the
// ceiling of bulk TCP on the wire: no retransmission, no jumbo frames.
const ethernetEfficiency = 1448.0 / 1538.0

const ethernetSource = "TCP/IPv4 goodput at 1500-byte MTU: 1448 of 1538 wire bytes"

// datacentreLatency is the one-way delay assumed for hosts in one data
// centre. Assumption: 50 us, the network latency VMware's vSphere
// Bitfusion 4.0 user guide (2021, its page on PVRDMA adapters) recommends
// at most between the hosts of a remote-GPU cluster, and of the order of
// the few tens of microseconds a round trip that "Network I/O Latency on
// VMware vSphere 5" (VMware performance study, 2012) measured the
// virtualisation layer to add. No source gives a one-way delay for a
// vMotion network; a stun waits on three such delays (StunLatency),
// 150 us, which is small beside its other costs.
const datacentreLatency = 50 * time.Microsecond

// The presets are functions, so that a caller who changes the Link one
// returns changes only its own copy, never a default of the package.

// Ethernet presets: TCP goodput over 1, 10, 25, 40 and 100 Gb/s Ethernet
// between hosts of one data centre, at ethernetEfficiency of the line
// rate. That is what a migration stream gets with enough streams to fill
// the link. vMotion reaches it only that way: VMware reports that one
// vMotion stream helper fills about 15 Gb/s and that, from vSphere 7 U2,
// vMotion starts as many streams as the NIC's bandwidth needs (VMware
// blog "Faster vMotion Makes Balancing Workloads Invisible", 2021); Broadcom
// KB 323379 (vCenter 7.0 and 8.0) gives a peak of 18 Gb/s for one vMotion
// VMkernel adapter on 40 GbE, 28 Gb/s for two and 36 Gb/s for three. A
// caller modelling one stream on 25 GbE and faster sets
// BandwidthBitsPerSec accordingly.

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
// VMware blog, August 2019, results section: TensorFlow benchmarks
// normalised to a local GPU in DirectPath I/O). The study reports
// application overhead against a local GPU, not link goodput; we take the
// worst overhead it reports for each network as the fraction of the line
// rate lost, a conservative reading. The latencies are assumptions for
// all three: the study reports overheads, not delays.

// VMXNET3 is 10 Gb/s paravirtual Ethernet, whose overhead the study puts
// between 4 % and 20 % -> 80 %. Latency: datacentreLatency, as for any TCP
// path between hosts.
func VMXNET3() Link {
	return Link{Name: "vmxnet3", BandwidthBitsPerSec: 10e9, Efficiency: 0.80, Latency: datacentreLatency,
		Source: bitfusionStudy + ": 10 Gb/s VMXNET3, overheads 4-20 %; worst case taken"}
}

// RoCE is 100 Gb/s RDMA over Converged Ethernet in DirectPath I/O, whose
// overhead the study puts at 5 % or less -> 95 %. Latency, an assumption:
// 5 us, a round figure above the under-2 us that VMware's Office of the CTO
// reported for InfiniBand in DirectPath I/O (its HPC blog, on a research
// note about RDMA in virtual machines), leaving room for an Ethernet
// switch hop.
func RoCE() Link {
	return Link{Name: "roce", BandwidthBitsPerSec: 100e9, Efficiency: 0.95, Latency: 5 * time.Microsecond,
		Source: bitfusionStudy + ": 100 Gb/s RoCE DirectPath I/O, 5 % or less overhead"}
}

// PVRDMA is VMware's paravirtual RDMA over 100 Gb/s RoCE. The study places
// it between the two, trading some performance for functionality such as
// vMotion, without a figure in its text. Assumption: 90 %, a round figure
// between VMXNET3's 80 % and RoCE's 95 %; latency 10 us, twice RoCE's for
// the paravirtual path through the hypervisor (no public measurement
// found).
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
