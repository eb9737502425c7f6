package live

import "encoding/binary"

// The wire as the fault table's taps read it: what each end of a live
// migration wrote, unit by unit, and the cuts that place a point of
// failure in it.

// wireUnit is one thing an end of a live migration wrote, as its header
// tells it before the rest arrives: the preamble, a control message, the
// checkpoint stream's header or one of its records. Offsets count the bytes
// that end wrote on its connection.
type wireUnit struct {
	kind       unitKind
	typ        uint16 // the message's or the record's type
	start, end int64
	first      uint64 // a record payload's first uvarint: a batch's region, an end of round's round
}

type unitKind uint8

const (
	unitPreamble unitKind = iota + 1
	unitMessage
	unitStreamHeader
	unitRecord
)

// The checkpoint record types, as FORMAT.md numbers them.
const (
	recDeviceState = 0x0002
	recPageBatch   = 0x0003
	recEndOfRound  = 0x0004
	recEndOfStream = 0x0005
)

// wireParser splits what one end writes into units. The source writes the
// offer, the hello, the stream (header, then records up to the end of
// stream) and then control messages; the destination writes only control
// messages.
type wireParser struct {
	buf   []byte
	stage unitKind // what comes next
	next  int64    // where it starts
	units []wireUnit
	// untagged counts the messages still to come without a tag: the
	// destination's challenge.
	untagged int
}

func newWireParser(source bool) *wireParser {
	if source {
		return &wireParser{stage: unitPreamble}
	}
	return &wireParser{stage: unitMessage, untagged: 1}
}

// feed adds written bytes and parses every unit whose header they complete.
func (w *wireParser) feed(p []byte) {
	w.buf = append(w.buf, p...)
	for w.next <= int64(len(w.buf)) {
		u, ok := w.parse(w.buf[w.next:], w.next)
		if !ok {
			return
		}
		w.units = append(w.units, u)
		w.next = u.end
	}
}

// parse reads the unit that b starts with, which starts at offset start
// of the end's writes, as the parser's stage expects it, and moves on to
// the next stage. If b does not hold enough of its header yet, it returns
// false and changes nothing.
func (w *wireParser) parse(b []byte, start int64) (wireUnit, bool) {
	have := int64(len(b))
	u := wireUnit{kind: w.stage, start: start}
	switch w.stage {
	case unitPreamble:
		if have < int64(offerBytes) {
			return u, false
		}
		u.end = start + int64(offerBytes)
	case unitMessage:
		if have < 5 {
			return u, false
		}
		u.typ, u.end = uint16(b[0]), start+5+int64(binary.LittleEndian.Uint32(b[1:5]))
		if w.untagged > 0 {
			w.untagged--
		} else {
			u.end += tagBytes
		}
	case unitStreamHeader:
		if have < 16 {
			return u, false
		}
		u.end = start + int64(binary.LittleEndian.Uint16(b[14:16]))
	case unitRecord:
		if have < 14 {
			return u, false
		}
		n := int64(binary.LittleEndian.Uint32(b[2:6]))
		if have < 14+min(n, binary.MaxVarintLen64) {
			return u, false // the payload's first uvarint is not here yet
		}
		u.typ, u.end = binary.LittleEndian.Uint16(b[0:2]), start+14+n+8
		u.first, _ = binary.Uvarint(b[14 : 14+min(n, binary.MaxVarintLen64)])
	}
	switch {
	case u.kind == unitPreamble:
		w.stage = unitMessage
	case u.kind == unitMessage && u.typ == uint16(msgHello):
		w.stage = unitStreamHeader
	case u.kind == unitStreamHeader:
		w.stage = unitRecord
	case u.kind == unitRecord && u.typ == recEndOfStream:
		w.stage = unitMessage
	}
	return u, true
}

// Cuts: where in an end's writes a point of failure lies.

// cutAtStart is the first byte.
func cutAtStart([]wireUnit) (int64, bool) { return 0, true }

// cutAfterMetadata is frac of span bytes past the end of the stream's
// metadata record, the start of round 0.
func cutAfterMetadata(span int64, frac float64) func([]wireUnit) (int64, bool) {
	return func(us []wireUnit) (int64, bool) {
		for _, u := range us {
			if u.kind == unitRecord {
				return u.end + int64(frac*float64(span)), true
			}
		}
		return 0, false
	}
}

// cutMidFirst is the middle of the first unit that match says is the
// point's, given the units before it.
func cutMidFirst(match func(before []wireUnit, u wireUnit) bool) func([]wireUnit) (int64, bool) {
	return func(us []wireUnit) (int64, bool) {
		for i, u := range us {
			if match(us[:i], u) {
				return u.start + (u.end-u.start)/2, true
			}
		}
		return 0, false
	}
}

// cutAtMessage is the start of the n-th control message (0-based) the end
// writes after the stream: the source's commit; the destination's accept,
// ready and resumed.
func cutAtMessage(n int) func([]wireUnit) (int64, bool) {
	return func(us []wireUnit) (int64, bool) {
		seen := 0
		for i, u := range us {
			if u.kind != unitMessage || us[0].kind == unitPreamble && !endedStream(us[:i]) {
				continue
			}
			if seen == n {
				return u.start, true
			}
			seen++
		}
		return 0, false
	}
}

// endedStream reports whether us hold the end-of-stream record.
func endedStream(us []wireUnit) bool {
	for _, u := range us {
		if u.kind == unitRecord && u.typ == recEndOfStream {
			return true
		}
	}
	return false
}

// roundsEnded counts the end-of-round records in us.
func roundsEnded(us []wireUnit) int {
	n := 0
	for _, u := range us {
		if u.kind == unitRecord && u.typ == recEndOfRound {
			n++
		}
	}
	return n
}
