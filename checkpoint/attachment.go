package checkpoint

import "unicode/utf8"

// Attachment is data of the caller's that a stream carries beside the VM's
// memory and devices, whole and checked as every record is: what a suspend
// file needs to bring the VM back (its spec, its workload's state). The
// package does not look inside Data.
type Attachment struct {
	// Name says what Data is; unique in a stream, UTF-8 of at most
	// MaxNameBytes bytes.
	Name string
	// Data is the attachment's bytes.
	Data []byte
}

// AttachmentPart is one attachment record: a part of an attachment, in
// order, since an attachment may be longer than a record.
type AttachmentPart struct {
	// Name is the attachment's name.
	Name string
	// TotalBytes is the whole attachment's length, the same in every part.
	TotalBytes int64
	// Offset is where Data goes in the attachment: the bytes of the parts
	// before it.
	Offset int64
	// Data is the part's bytes; it aliases the reader's buffer.
	Data []byte
}

// Bounds on attachments.
const (
	// MaxAttachments bounds the attachments of a stream.
	MaxAttachments = 64
	// attachmentPartBytes is the most a writer puts in one record, well
	// within the default record limit.
	attachmentPartBytes = 1 << 20
)

func appendAttachmentPart(b []byte, p *AttachmentPart) []byte {
	b = appendString(b, p.Name)
	b = appendUvarint(b, uint64(p.TotalBytes))
	b = appendUvarint(b, uint64(p.Offset))
	return appendBytes(b, p.Data)
}

func decodeAttachmentPart(b []byte, p *AttachmentPart, max int64, newer bool) (why string, overLimit bool) {
	d := newDecoder(b)
	p.Name = d.string("attachment name", MaxNameBytes, p.Name)
	p.TotalBytes = int64(d.uvarintLimit("attachment length", uint64(max)))
	p.Offset = int64(d.uvarintMax("attachment offset", uint64(p.TotalBytes)))
	p.Data = d.bytes("attachment part", d.uvarintMax("attachment part length", uint64(p.TotalBytes-p.Offset)))
	d.end(newer)
	if d.ok && len(p.Data) == 0 && p.TotalBytes != 0 {
		d.fail("empty attachment part")
	}
	return d.problem()
}

// attachments follows the attachments of a stream, part by part: each
// must come whole, in order, once. A reader's tally keeps one.
type attachments struct {
	names    []string
	received []int64 // by index in names
	totals   []int64
}

func (a *attachments) reset() {
	a.names, a.received, a.totals = a.names[:0], a.received[:0], a.totals[:0]
}

// add checks part p against the parts before it, and the attachments'
// lengths against max all together, and counts it.
func (a *attachments) add(p *AttachmentPart, max int64) (why string, overLimit bool) {
	if !utf8.ValidString(p.Name) {
		return "attachment name is not UTF-8", false
	}
	for i, n := range a.names {
		if n != p.Name {
			continue
		}
		switch {
		case a.received[i] == a.totals[i]:
			return "attachment " + quoteShort(p.Name) + " repeated", false
		case p.TotalBytes != a.totals[i]:
			return "attachment " + quoteShort(p.Name) + " changes its length", false
		case p.Offset != a.received[i]:
			return "attachment " + quoteShort(p.Name) + " part out of order, or repeated", false
		}
		a.received[i] += int64(len(p.Data))
		return "", false
	}
	total := p.TotalBytes
	for _, t := range a.totals {
		total += t
	}
	switch {
	case len(a.names) == MaxAttachments:
		return "too many attachments", true
	case total > max:
		return "attachments of " + utoa(uint64(total)) + " bytes over the limit of " + utoa(uint64(max)), true
	case p.Offset != 0:
		return "attachment " + quoteShort(p.Name) + " starts past its beginning", false
	}
	a.names = append(a.names, p.Name)
	a.totals = append(a.totals, p.TotalBytes)
	a.received = append(a.received, int64(len(p.Data)))
	return "", false
}

// incomplete returns the name of an attachment not received whole, or "".
func (a *attachments) incomplete() (string, bool) {
	for i, n := range a.names {
		if a.received[i] != a.totals[i] {
			return n, true
		}
	}
	return "", false
}
